package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/internal/local/registry"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// built is one release build of the work tree, shared by the tests.
var built struct {
	once   sync.Once
	dir    string
	digest v1.Hash
	err    error
}

// options builds the work tree's release into out, from the repository's
// lock, with the packages cached under bin/ across runs, signed with a
// key of the build's.
func options(out string) Options {
	root := testenv.RepoRoot()
	return Options{Version: "0.0.0-test", Repo: root, Lock: filepath.Join(root, "hack", "release", "packages.lock"),
		Cache: filepath.Join(root, "bin", "release", "cache"), Out: out, Epoch: time.Unix(1700000000, 0).UTC(),
		Key: filepath.Join(filepath.Dir(out), filepath.Base(out)+"-signing", "cosign.key")}
}

// releaseIndex is strata's image index in the release's layout.
func releaseIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	return indexNamed(t, dir, "strata:0.0.0-test")
}

// outerIndex is the release's layout's index and what it names.
func outerIndex(t *testing.T, dir string) (v1.ImageIndex, *v1.IndexManifest) {
	t.Helper()
	outer, err := layout.ImageIndexFromPath(filepath.Join(dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return outer, m
}

// indexNamed is the index the release's layout names ref.
func indexNamed(t *testing.T, dir, ref string) v1.ImageIndex {
	t.Helper()
	outer, m := outerIndex(t, dir)
	for _, d := range m.Manifests {
		if d.Annotations[refName] == ref {
			idx, err := outer.ImageIndex(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return idx
		}
	}
	t.Fatalf("the layout names no index %s", ref)
	return nil
}

func release(t *testing.T) (string, v1.Hash) {
	t.Helper()
	testenv.NeedTools(t, "apt-get", "apt-cache", "dpkg-deb", "go")
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "strata-release-")
		if built.err == nil {
			built.digest, built.err = Build(context.Background(), options(built.dir))
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.digest
}

// TestMain removes the shared build, which outlives each test.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
		_ = os.RemoveAll(filepath.Dir(options(built.dir).Key))
	}
	os.Exit(code)
}

// Two builds of one commit give the same image index, byte for byte.
func TestTwoBuildsOfOneCommitAreTheSame(t *testing.T) {
	_, first := release(t)
	o := options(t.TempDir())
	o.Key = options(built.dir).Key // the same key: a signature is the same too
	again, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("two builds of one commit: index %s, then %s", first, again)
	}
	for _, f := range []string{"strata-0.0.0-test.tgz", "SHA256SUMS"} {
		a, errA := fileSHA256(filepath.Join(built.dir, f))
		b, errB := fileSHA256(filepath.Join(o.Out, f))
		if errA != nil || errB != nil || a != b {
			t.Fatalf("two builds of one commit: %s is %s, then %s (%v, %v)", f, a, b, errA, errB)
		}
	}
}

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

// A release verifies offline with its public key; one changed byte of a
// layer, of an SBOM or of the signature's payload fails, naming what, as
// does a key the release was not signed with.
func TestVerifyNamesWhatWasTamperedWith(t *testing.T) {
	dir, _ := release(t)
	pub, err := readPublicKey(filepath.Join(filepath.Dir(options(dir).Key), "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, pub); err != nil {
		t.Fatalf("the release as built: %v", err)
	}
	for _, tc := range []struct {
		name, blob, says string
	}{
		{"a layer", "layer 1 of the amd64 image of the image index strata:0.0.0-test", "layer 1 of the amd64 image of the image index strata:0.0.0-test"},
		{"a sidecar's layer", "layer 1 of the arm64 image of the image index csi-provisioner:v6.4.0", "layer 1 of the arm64 image of the image index csi-provisioner:v6.4.0"},
		{"an SBOM", "the SBOM of the arm64 image of strata:0.0.0-test", "layer 1 of an SBOM"},
		{"the signature", "the signature's payload of strata:0.0.0-test", "layer 1 of the signature of strata:0.0.0-test"},
		{"the chart", "the chart's package", "layer 1 of the chart"},
		{"the chart beside the layout", "", "strata-0.0.0-test.tgz is not the signed chart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copyDir := linkTree(t, dir)
			if tc.blob == "" {
				flipByte(t, filepath.Join(copyDir, "strata-0.0.0-test.tgz"))
			} else {
				flipByte(t, blobNamed(t, copyDir, pub, tc.blob))
			}
			err := Verify(copyDir, pub)
			if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "changed") {
				t.Fatalf("verify after %s changed: %v; want an error naming %q", tc.name, err, tc.says)
			}
		})
	}
	other, err := makeKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, &other.PublicKey); err == nil || !strings.Contains(err.Error(), "does not match the key") {
		t.Fatalf("verify with another key: %v", err)
	}
}

// blobNamed finds the path of the blob Verify calls what, by reading the
// layout as Verify does and recording the names it gives.
func blobNamed(t *testing.T, dir string, pub *ecdsa.PublicKey, what string) string {
	t.Helper()
	names := map[string]string{}
	l := &layoutReader{dir: filepath.Join(dir, "image"), seen: func(w, path string) { names[w] = path }}
	if err := l.verify(pub); err != nil {
		t.Fatal(err)
	}
	path, ok := names[what]
	if !ok {
		t.Fatalf("no blob is %q; the blobs are %v", what, names)
	}
	return path
}

// linkTree is a copy of the release made of hard links: a test changes a
// file by writing a new one in its place (flipByte), never the shared one.
func linkTree(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		return os.Link(path, filepath.Join(out, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// flipByte changes one byte of a file, written as a new file in its place.
func flipByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The release's chart says the release's version three times, as its
// version, its appVersion and its image's tag, and pulls the image by the
// index's digest; rendered, every strata container runs exactly that.
func TestTheChartNamesTheRelease(t *testing.T) {
	dir, digest := release(t)
	chart := filepath.Join(dir, "strata-0.0.0-test.tgz")
	out, err := testenv.Helm(t, "show", "chart", chart)
	if err != nil {
		t.Fatalf("helm show chart: %v: %s", err, out)
	}
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(out, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != "0.0.0-test" || meta.AppVersion != "0.0.0-test" {
		t.Fatalf("the chart is version %q, appVersion %q; want both the release's, 0.0.0-test", meta.Version, meta.AppVersion)
	}
	rendered, err := testenv.Helm(t, "template", "strata", chart, "--set", "image.repository=registry.test/strata", "--set", "csiSidecars.registry=registry.test",
		"--set", "snapshotController.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v: %s", err, rendered)
	}
	want := map[string]bool{"registry.test/strata:0.0.0-test@" + digest.String(): true}
	sidecars, err := readSidecars(filepath.Join(testenv.RepoRoot(), "hack", "sidecars.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sidecars {
		d, err := indexNamed(t, dir, c.name+":"+c.tag).Digest()
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("registry.test/%s:%s@%s", c.name, c.tag, d)] = true
	}
	images := regexp.MustCompile(`image: "?([^"\s]+)"?`).FindAllStringSubmatch(string(rendered), -1)
	seen := map[string]bool{}
	for _, m := range images {
		if !want[m[1]] {
			t.Fatalf("the rendered chart runs %s, which is not one of the release's images %v", m[1], want)
		}
		seen[m[1]] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("the rendered chart runs %v; want each of %v", seen, want)
	}
}

// A chart whose values name an image by another digest than the
// release's index fails verification, naming the image.
func TestAChartNamingAnotherDigestFails(t *testing.T) {
	dir, _ := release(t)
	tgz, err := os.ReadFile(filepath.Join(dir, "strata-0.0.0-test.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	_, m := outerIndex(t, dir)
	var indexes []v1.Descriptor
	for _, d := range m.Manifests {
		if d.MediaType == types.OCIImageIndex {
			indexes = append(indexes, d)
		}
	}
	if err := chartNamesImages(tgz, indexes); err != nil {
		t.Fatalf("the chart as built: %v", err)
	}
	for i, d := range indexes {
		if strings.HasPrefix(d.Annotations[refName], "csi-attacher:") {
			indexes[i].Digest.Hex = strings.Repeat("0", 64)
		}
	}
	if err := chartNamesImages(tgz, indexes); err == nil || !strings.Contains(err.Error(), "the chart names csi-attacher by") {
		t.Fatalf("a chart naming csi-attacher by another digest: %v", err)
	}
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

// A blob swapped for a larger file is refused by its size, before it is
// read, naming it.
func TestABlobLargerThanItsDescriptorIsNotRead(t *testing.T) {
	dir := t.TempDir()
	data := []byte("the blob")
	sum := sha256.Sum256(data)
	d := v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Size: int64(len(data))}
	path := filepath.Join(dir, "blobs", "sha256", d.Digest.Hex)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l := &layoutReader{dir: dir}
	if _, err := l.blob(d, "layer 1 of the amd64 image"); err != nil {
		t.Fatalf("the blob as written: %v", err)
	}
	if err := os.WriteFile(path, append(data, make([]byte, 1<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.blob(d, "layer 1 of the amd64 image"); err == nil || !strings.Contains(err.Error(), "1048584 bytes, not the 8") || !strings.Contains(err.Error(), "layer 1 of the amd64 image") {
		t.Fatalf("a blob grown by 1 MiB: %v", err)
	}
}

// A release pushed to a real registry (distribution's) is what users
// reach: cosign verifies strata's index, a sidecar's and the chart with
// the release's key, and refuses another key; Helm installs the chart
// from oci:// by version; each image lists its SBOM as a referrer.
func TestThePushedReleaseVerifiesWithCosign(t *testing.T) {
	bin := filepath.Join(testenv.RepoRoot(), "bin")
	for _, tool := range []string{"registry", "cosign"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			testenv.Unavailable(t, "bin/"+tool+" is not built: run hack/tools.sh "+tool)
		}
	}
	dir, _ := release(t)
	ctx := context.Background()
	addr := freeAddress(t)
	reg, err := registry.Start(ctx, filepath.Join(bin, "registry"), t.TempDir(), addr, filepath.Join(t.TempDir(), "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Process.Kill(); _ = reg.Wait() })
	if err := Push(ctx, dir, addr); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(filepath.Dir(options(dir).Key), "cosign.pub")
	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := makeKey(other); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"strata/strata:0.0.0-test", "strata/csi-provisioner:v6.4.0", "charts/strata:0.0.0-test"} {
		if out, err := cosign(bin, pub, addr+"/"+ref); err != nil {
			t.Fatalf("cosign verify %s: %v\n%s", ref, err, out)
		}
		if out, err := cosign(bin, filepath.Join(filepath.Dir(other), "cosign.pub"), addr+"/"+ref); err == nil {
			t.Fatalf("cosign verify %s with another key passed:\n%s", ref, out)
		}
	}
	if out, err := testenv.Helm(t, "show", "chart", "oci://"+addr+"/charts/strata", "--version", "0.0.0-test", "--plain-http"); err != nil || !strings.Contains(string(out), "version: 0.0.0-test") {
		t.Fatalf("helm show chart from the registry: %v\n%s", err, out)
	}
	m, err := releaseIndex(t, dir).IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range m.Manifests {
		ref, err := name.NewDigest(addr+"/strata/strata@"+img.Digest.String(), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		referrers, err := remote.Referrers(ref)
		if err != nil {
			t.Fatal(err)
		}
		rm, err := referrers.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(rm.Manifests) != 1 || rm.Manifests[0].ArtifactType != sbomMediaType {
			t.Fatalf("the %s image's referrers are %+v; want its SBOM", img.Platform.Architecture, rm.Manifests)
		}
	}
}

func cosign(bin, pub, ref string) ([]byte, error) {
	return exec.Command(filepath.Join(bin, "cosign"), "verify", "--key", pub, "--insecure-ignore-tlog=true",
		"--allow-http-registry", "--allow-insecure-registry", ref).CombinedOutput()
}

// freeAddress is a loopback address no one listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
