package artifact

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	meta "github.com/fluxcd/pkg/apis/meta"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func filesOf(contents map[string]string) []File {
	var files []File
	for name, content := range contents {
		files = append(files, File{Path: name, Executable: strings.HasSuffix(name, ".sh"),
			Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(content)), nil }})
	}
	return files
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got, err := testenv.ReadTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// storeAndOpen stores files and returns the artifact and its tree.
func storeAndOpen(t *testing.T, s *Storage, files map[string]string) (*meta.Artifact, string) {
	t.Helper()
	a, err := s.Store("gitrepository/ns/repo", "main@sha1:abc", filesOf(files))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := s.Dir(a)
	if err != nil {
		t.Fatal(err)
	}
	return a, dir
}

// TestStoreWritesTheTree: the tree Store writes beside the tarball and the
// tree extracted from the tarball are the same files.
func TestStoreWritesTheTree(t *testing.T) {
	s, err := NewStorage(t.TempDir(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/b/c.yaml": "kind: ConfigMap\n", "run.sh": "#!/bin/sh\n", "top.yaml": "x: 1\n"}
	a, dir := storeAndOpen(t, s, want)
	if got := readTree(t, dir); len(got) != len(want) || got["a/b/c.yaml"] != want["a/b/c.yaml"] || got["run.sh"] != want["run.sh"] {
		t.Fatalf("stored tree %v, want %v", got, want)
	}
	if info, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("executable file lost its mode: %v %v", info.Mode(), err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	extracted, err := s.Dir(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, extracted); len(got) != len(want) || got["top.yaml"] != want["top.yaml"] {
		t.Errorf("extracted tree %v, want %v", got, want)
	}
}

// TestStoreRefusesEscapingPaths leaves nothing behind.
func TestStoreRefusesEscapingPaths(t *testing.T) {
	s, err := NewStorage(t.TempDir(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Store("gitrepository/ns/repo", "main@sha1:abc", filesOf(map[string]string{"ok.yaml": "a", "../../escape.yaml": "b"}))
	if err == nil || !strings.Contains(err.Error(), "escapes the artifact root") {
		t.Fatalf("error %v, want the escaping entry named", err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Root, "gitrepository/ns/repo"))
	for _, e := range entries {
		t.Errorf("left behind: %s", e.Name())
	}
	if _, err := os.Stat(filepath.Join(s.Root, "gitrepository", "escape.yaml")); err == nil {
		t.Error("a file was written outside the artifact")
	}
}

// afterReboot is the same storage as the next boot of the machine sees it.
func afterReboot(t *testing.T, s *Storage) *Storage {
	t.Helper()
	next, err := NewStorage(s.Root, s.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	next.bootID = s.bootID + "-next"
	return next
}

// TestDamageFromAPowerFailureIsNeverUsed: artifacts are written without
// waiting for the disk, so after a reboot a tree is rebuilt from its
// verified tarball, and a damaged tarball is removed, never read.
func TestDamageFromAPowerFailureIsNeverUsed(t *testing.T) {
	s, err := NewStorage(t.TempDir(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	if s.bootID == "" {
		t.Skip("no boot id on this system: artifacts are written durably")
	}
	want := map[string]string{"app/a.yaml": "kind: ConfigMap\nmetadata:\n  name: a\n"}
	a, dir := storeAndOpen(t, s, want)
	// The power failed before the tree reached the disk.
	if err := os.WriteFile(filepath.Join(dir, "app/a.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Dir(a); readTree(t, got)["app/a.yaml"] != "" {
		t.Fatal("the test did not damage the tree")
	}
	next := afterReboot(t, s)
	dir, err = next.Dir(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, dir)["app/a.yaml"]; got != want["app/a.yaml"] {
		t.Errorf("after a reboot the damaged tree was used: %q", got)
	}

	// Now the tarball itself is damaged.
	if err := os.WriteFile(filepath.Join(s.Root, a.Path), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	again := afterReboot(t, next)
	if _, err := again.Dir(a); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged tarball gave %v, want an error saying it is damaged", err)
	}
	if again.Has(a) {
		t.Error("the damaged tarball is still there, so the source would not store it again")
	}
}

// TestGarbageTreeIsRecycled: the tree of a collected artifact is set aside
// and the next Store rewrites only what differs in it. The result is
// exactly what extracting the new tarball gives, whatever changed: a file
// removed, a directory emptied, a file become a directory, a mode.
func TestGarbageTreeIsRecycled(t *testing.T) { testRecycling(t, false) }

// A tree written before the controller restarted is recycled as well: its
// tarball says what it holds. The first pushes after a restart had each
// written the whole tree.
func TestATreeOfAnEarlierProcessIsRecycled(t *testing.T) { testRecycling(t, true) }

func testRecycling(t *testing.T, restart bool) {
	root := t.TempDir()
	s, err := NewStorage(root, "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]string{"keep.yaml": "k: 1\n", "a.yaml": "a: 1\n", "d/b.yaml": "b: 1\n", "d/e/c.yaml": "c: 1\n",
		"x": "file\n", "run": "#!/bin/sh\n"}
	_, dir1 := storeAndOpen(t, s, first)
	if restart {
		if s, err = NewStorage(root, "http://localhost"); err != nil {
			t.Fatal(err)
		}
	}
	// Held open, the file's inode cannot be reused by a rewrite.
	f, err := os.Open(filepath.Join(dir1, "keep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kept, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := storeAndOpen(t, s, map[string]string{"keep.yaml": "k: 1\n", "two.yaml": "2\n"})
	if err := s.GarbageCollect("gitrepository/ns/repo", a2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir1); !os.IsNotExist(err) {
		t.Fatalf("collected tree %s is still addressable: %v", dir1, err)
	}

	next := map[string]string{"keep.yaml": "k: 1\n", "a.yaml": "a: 2\n", "x/y.yaml": "y: 1\n", "run.sh": "#!/bin/sh\n",
		"n/m.yaml": "m: 1\n"}
	a3, dir3 := storeAndOpen(t, s, next)
	if got := treeShape(t, dir3); !equalShapes(got, shapeOf(next)) {
		t.Fatalf("recycled tree:\n%v\nwant:\n%v", got, shapeOf(next))
	}
	reused, err := os.Stat(filepath.Join(dir3, "keep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(kept, reused) {
		t.Errorf("an unchanged file was rewritten: the collected tree was not recycled")
	}
	if _, err := os.Stat(filepath.Join(s.Root, "gitrepository/ns/repo", spareTree)); !os.IsNotExist(err) {
		t.Errorf("the spare tree is still there after use: %v", err)
	}
	fresh := t.TempDir()
	if _, err := extract(filepath.Join(s.Root, a3.Path), fresh, &budget{Limits: s.Limits}); err != nil {
		t.Fatal(err)
	}
	if got, want := treeShape(t, dir3), treeShape(t, fresh); !equalShapes(got, want) {
		t.Errorf("recycled tree %v differs from the extracted tarball %v", got, want)
	}
}

// treeShape lists every file with its content and mode, and every
// directory, so that a left-over empty directory shows.
func treeShape(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if info.IsDir() {
			out[filepath.ToSlash(rel)+"/"] = "dir"
			return nil
		}
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%o %s", info.Mode().Perm(), data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// shapeOf is the treeShape that files should have once stored.
func shapeOf(files map[string]string) map[string]string {
	out := map[string]string{}
	for name, content := range files {
		mode := 0o644
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		out[name] = fmt.Sprintf("%o %s", mode, content)
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			out[d+"/"] = "dir"
		}
	}
	return out
}

func equalShapes(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A file or an artifact over the limits is a clear failure when stored,
// and a tarball over them is refused when read back.
func TestSizeLimits(t *testing.T) {
	s, err := NewStorage(t.TempDir(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	s.Limits = Limits{File: 1000, Artifact: 2500}
	_, err = s.Store("gitrepository/ns/big", "main@sha1:1", filesOf(map[string]string{"disk.img": strings.Repeat("x", 1001)}))
	if err == nil || !strings.Contains(err.Error(), "file disk.img is 1001 bytes, over the limit of 1000") {
		t.Fatalf("storing a file over the limit: %v", err)
	}
	many := map[string]string{}
	for i := range 3 {
		many[fmt.Sprintf("f%d.yaml", i)] = strings.Repeat("x", 900)
	}
	_, err = s.Store("gitrepository/ns/many", "main@sha1:2", filesOf(many))
	if err == nil || !strings.Contains(err.Error(), "over 2500 bytes, the limit per artifact") {
		t.Fatalf("storing an artifact over the limit: %v", err)
	}

	s.Limits = DefaultLimits
	a, err := s.Store("gitrepository/ns/ok", "main@sha1:3", filesOf(many))
	if err != nil {
		t.Fatal(err)
	}
	_, err = extract(filepath.Join(s.Root, a.Path), t.TempDir(), &budget{Limits: Limits{File: 100, Artifact: 1 << 20}})
	if err == nil || !strings.Contains(err.Error(), "over the limit of 100 per file") {
		t.Fatalf("reading back a tarball with files over the limit: %v", err)
	}
}
