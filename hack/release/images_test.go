package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Every ELF file of each architecture's image is built for it, and finds
// the libraries it needs in the image.
func TestEachImageIsItsArchitecturesWithItsLibraries(t *testing.T) {
	dir, _ := release(t)
	idx := releaseIndex(t, dir)
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	if len(manifest.Manifests) != len(machines) {
		t.Fatalf("the index holds %d images, want one for each of %v", len(manifest.Manifests), Architectures)
	}
	for _, desc := range manifest.Manifests {
		arch := desc.Platform.Architecture
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		files := filesOf(t, img)
		if _, ok := files["usr/local/bin/strata"]; !ok {
			t.Fatalf("the %s image has no usr/local/bin/strata", arch)
		}
		checked := checkELFs(t, arch, machines[arch], files)
		t.Logf("%s: %d files, %d ELF binaries and libraries checked", arch, len(files), checked)
		if checked < 100 {
			t.Fatalf("the %s image has only %d ELF files: the tools are missing", arch, checked)
		}
	}
}

// strata's image holds every program strata runs, on its PATH, for each
// architecture.
func TestTheStrataImageHoldsTheToolsItRuns(t *testing.T) {
	dir, _ := release(t)
	idx := releaseIndex(t, dir)
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range manifest.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		files := filesOf(t, img)
		for _, tool := range strataTools {
			if !foundIn(files, []string{"usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin"}, tool) {
				t.Errorf("the %s image has no %s on its PATH", desc.Platform.Architecture, tool)
			}
		}
	}
}

// filesOf reads an image's files, the later layers over the earlier:
// path to contents, or to the target of a link.
func filesOf(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]file{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimSuffix(hdr.Name, "/")
			switch hdr.Typeflag {
			case tar.TypeReg:
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files[name] = file{data: data, mode: hdr.Mode}
			case tar.TypeSymlink:
				files[name] = file{link: hdr.Linkname}
			case tar.TypeLink:
				files[name] = files[hdr.Linkname]
			}
		}
		_ = rc.Close()
	}
	return files
}

type file struct {
	data []byte
	link string
	mode int64
}

// checkELFs checks every ELF file's machine and that each library it
// needs is in the image's library folders; it returns how many it read.
func checkELFs(t *testing.T, arch string, machine elf.Machine, files map[string]file) int {
	t.Helper()
	checked := 0
	for name, f := range files {
		if !bytes.HasPrefix(f.data, []byte("\x7fELF")) {
			continue
		}
		e, err := elf.NewFile(bytes.NewReader(f.data))
		if err != nil {
			t.Errorf("%s: %s: %v", arch, name, err)
			continue
		}
		checked++
		if e.Machine != machine {
			t.Errorf("%s: %s is built for %s", arch, name, e.Machine)
		}
		needed, _ := e.ImportedLibraries()
		dirs := append(runPath(e, path.Dir(name)), libraryDirs...)
		for _, lib := range needed {
			if !foundIn(files, dirs, lib) {
				t.Errorf("%s: %s needs %s, which the image lacks", arch, name, lib)
			}
		}
	}
	return checked
}

// libraryDirs are the folders Debian's dynamic loader searches by default.
var libraryDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib", "usr/lib"}

// runPath is the folders an ELF file names for its libraries (RUNPATH,
// RPATH), $ORIGIN being its own folder dir.
func runPath(e *elf.File, dir string) []string {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		values, _ := e.DynString(tag)
		for _, v := range values {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", "/"+dir), "$ORIGIN", "/"+dir)
				dirs = append(dirs, strings.TrimPrefix(path.Clean(d), "/"))
			}
		}
	}
	return dirs
}

// foundIn says whether a file (a library, a tool) is in one of the folders, following
// links within the image.
func foundIn(files map[string]file, dirs []string, lib string) bool {
	for _, dir := range dirs {
		name := path.Join(dir, lib)
		for range 8 { // links, resolved within the image
			f, ok := files[name]
			if !ok {
				break
			}
			if f.link == "" {
				return true
			}
			if path.IsAbs(f.link) {
				name = strings.TrimPrefix(f.link, "/")
			} else {
				name = path.Join(path.Dir(name), f.link)
			}
		}
	}
	return false
}

// The arm64 image's tools run: strata, lvm and qemu-img, each on the
// image's own libraries, under qemu-user-static's emulation of AArch64.
func TestTheArm64ToolsRun(t *testing.T) {
	testenv.NeedTools(t, "qemu-aarch64-static")
	dir, _ := release(t)
	idx := releaseIndex(t, dir)
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, desc := range manifest.Manifests {
		if desc.Platform.Architecture != "arm64" {
			continue
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		writeTree(t, root, filesOf(t, img))
	}
	for _, tool := range [][]string{{"usr/local/bin/strata", "version"}, {"sbin/lvm", "version"}, {"usr/bin/qemu-img", "--version"}} {
		cmd := exec.Command("qemu-aarch64-static", append([]string{"-L", root, filepath.Join(root, tool[0])}, tool[1:]...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s on arm64: %v: %s", tool[0], tool[1], err, out)
		}
		t.Logf("%s %s: %s", tool[0], tool[1], versionLine(string(out)))
	}
}

// writeTree writes an image's files under root, links as links.
func writeTree(t *testing.T, root string, files map[string]file) {
	t.Helper()
	for name, f := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if f.link != "" {
			if err := os.Symlink(f.link, p); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, f.data, os.FileMode(f.mode&0o777)|0o400); err != nil {
			t.Fatal(err)
		}
	}
}

// versionLine is the line of a tool's output that gives its version.
func versionLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(strings.ToLower(line), "version") && !strings.Contains(line, "leaked") {
			return strings.TrimSpace(line)
		}
	}
	return strings.TrimSpace(out)
}

// Every image of the release is built for amd64 and arm64, and runs a
// program built for its architecture.
func TestEveryComponentIsBuiltForBothArchitectures(t *testing.T) {
	dir, _ := release(t)
	o := options(dir)
	comps, err := components(o)
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, c := range comps {
		idx := indexNamed(t, dir, c.name+":"+c.tag)
		manifest, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(manifest.Manifests) != len(machines) {
			t.Fatalf("%s: the index holds %d images, want one for each of %v", c.name, len(manifest.Manifests), Architectures)
		}
		for _, desc := range manifest.Manifests {
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			program := filesOf(t, img)[strings.TrimPrefix(c.binary, "/")]
			e, err := elf.NewFile(bytes.NewReader(program.data))
			if err != nil {
				t.Fatalf("%s for %s: %s: %v", c.name, desc.Platform.Architecture, c.binary, err)
			}
			if e.Machine != machines[desc.Platform.Architecture] {
				t.Fatalf("%s for %s runs a program built for %s", c.name, desc.Platform.Architecture, e.Machine)
			}
		}
	}
}
