package artifact

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	meta "github.com/fluxcd/pkg/apis/meta"
)

// keyedFiles are files with keys, as a git tree's are; open says which may
// be read, the others fail when opened.
func keyedFiles(contents map[string]string, open func(name string) bool) []File {
	var files []File
	for name, content := range contents {
		files = append(files, File{Path: name, Executable: strings.HasSuffix(name, ".sh"),
			Key: fmt.Sprintf("%x", sha256.Sum256([]byte(content))),
			Open: func() (io.ReadCloser, error) {
				if !open(name) {
					return nil, errors.New("read " + name + ": a copied member's file was read")
				}
				return io.NopCloser(strings.NewReader(content)), nil
			}})
	}
	return files
}

func anyFile(string) bool { return true }

// TestAPushCopiesItsUnchangedMembers: storing a revision that changed a
// few files of many reads and compresses only those, copying the rest from
// the previous tarball; the tarball is byte for byte what a storage
// without a previous one writes, and holds exactly the revision's files.
func TestAPushCopiesItsUnchangedMembers(t *testing.T) {
	first := map[string]string{}
	for i := range 1200 {
		first[fmt.Sprintf("apps/app-%03d/deploy.yaml", i)] = fmt.Sprintf("kind: Deployment # %d\n", i)
	}
	first["hack/run.sh"] = "#!/bin/sh\n"
	second := maps.Clone(first)
	second["apps/app-100/deploy.yaml"] = "changed in the second revision\n"
	third := maps.Clone(second)
	third["apps/app-300/deploy.yaml"] = "changed in the third revision\n"
	third["apps/app-400/deploy.yaml"] = "added in the third revision\n"
	delete(third, "apps/app-200/deploy.yaml")

	s, err := NewStorage(t.TempDir(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	const dir = "gitrepository/ns/repo"
	store := func(s *Storage, contents map[string]string, open func(string) bool) *meta.Artifact {
		t.Helper()
		a, err := s.Store(dir, "main@sha1:x", keyedFiles(contents, open))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	store(s, first, anyFile)
	second1 := store(s, second, anyFile)
	// The first revision's tree is set aside: the third is written into
	// it, so a file that changed since the first is read for the tree.
	if err := s.GarbageCollect(dir, second1); err != nil {
		t.Fatal(err)
	}
	// Only the members whose files changed are compressed: their files
	// are read, the others' are not.
	before := map[string]bool{}
	for _, r := range runsIn(second) {
		before[r.key] = true
	}
	readable := map[string]bool{}
	for _, r := range runsIn(third) {
		for _, f := range r.files {
			// The tree is written into the first revision's: a file the
			// third holds otherwise is read for it.
			readable[f.Path] = !before[r.key] || first[f.Path] != third[f.Path]
		}
	}
	if n := len(slices.DeleteFunc(slices.Collect(maps.Values(readable)), func(read bool) bool { return !read })); n > len(third)/4 {
		t.Fatalf("%d of %d files share a member with a change: too many for the test to tell copying", n, len(third))
	}
	pushed := store(s, third, func(name string) bool { return readable[name] })

	fresh, err := NewStorage(t.TempDir(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	if want := store(fresh, third, anyFile); pushed.Digest != want.Digest {
		t.Errorf("the pushed tarball has digest %s, one written whole %s", pushed.Digest, want.Digest)
	}
	if got := tarballFiles(t, filepath.Join(s.Root, pushed.Path)); !maps.Equal(got, third) {
		t.Errorf("the pushed tarball holds %d files, want the third revision's %d", len(got), len(third))
	}
	tree, err := s.Dir(pushed)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, tree); !maps.Equal(got, third) {
		t.Errorf("the pushed tree holds %d files, want the third revision's %d", len(got), len(third))
	}
	if info, err := os.Stat(filepath.Join(tree, "hack/run.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("a copied executable file lost its mode: %v", err)
	}
}

// runsIn are the members a Store of contents writes.
func runsIn(contents map[string]string) []run {
	files := keyedFiles(contents, anyFile)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return runsOf(files)
}

// tarballFiles reads a tarball with the standard library alone, as any
// consumer of an artifact would.
func tarballFiles(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = string(data)
	}
}
