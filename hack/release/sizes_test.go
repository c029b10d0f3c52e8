package main

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// A program's code is counted by module from its function table: this
// test binary holds code of Go's own, of this module and of
// go-containerregistry, and no module is counted twice.
func TestModuleSizesCountAProgramsCodeByModule(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binary, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := moduleSizes(binary)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var total int64
	for _, s := range sizes {
		if _, twice := got[s.module]; twice {
			t.Fatalf("%s counted twice", s.module)
		}
		got[s.module] = s.bytes
		total += s.bytes
	}
	for _, m := range []string{"std", "github.com/strata-gitops/strata", "github.com/google/go-containerregistry"} {
		if got[m] <= 0 {
			t.Errorf("no code counted for %s: %v", m, sizes)
		}
	}
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatal(err)
	}
	if text := int64(f.Section(".text").Size); total > text || total < text/2 {
		t.Errorf("%d bytes of functions counted, the code section holds %d", total, text)
	}
}

// The node binary, as the release builds it, is within its bound; it
// and strata's own binary, which decrypts SOPS files, link no cloud key
// service. The real sops CLI does, which shows the check sees them.
func TestTheNodeBinaryIsLean(t *testing.T) {
	dir, _ := release(t)
	programs := map[string][]byte{}
	for _, name := range []string{"strata", "strata-node"} {
		idx := indexNamed(t, dir, name+":0.0.0-test")
		manifest, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, desc := range manifest.Manifests {
			if desc.Platform.Architecture != "amd64" {
				continue
			}
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			programs[name] = filesOf(t, img)["usr/local/bin/"+name].data
		}
	}
	node := programs["strata-node"]
	if len(node) == 0 || len(node) > NodeBinaryBound {
		t.Errorf("the node binary is %d bytes, bound %d", len(node), NodeBinaryBound)
	}
	for name, binary := range programs {
		if linked, err := linkedKeyServices(binary); err != nil || len(linked) != 0 {
			t.Errorf("%s links cloud key services %v (%v)", name, linked, err)
		}
	}
	sops, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bin", "sops"))
	if err != nil {
		testenv.Unavailable(t, "bin/sops is not built: run hack/tools.sh sops")
	}
	if linked, err := linkedKeyServices(sops); err != nil || len(linked) == 0 {
		t.Errorf("the sops CLI links no cloud key service (%v): the check sees nothing", err)
	}
	if notes, err := os.ReadFile(filepath.Join(dir, "RELEASE_NOTES.md")); err != nil || !strings.Contains(string(notes), "| `/usr/local/bin/strata-node` |") {
		t.Errorf("the notes give no size of the node binary: %v", err)
	}
}
