package git

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/strata-gitops/strata/internal/local/gitserver"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// BenchmarkArtifact stores and extracts the artifact of a commit with
// 4000 small files, the bench's repository, which is what a push waits for
// before any Kustomization can apply.
func BenchmarkArtifact(b *testing.B) {
	tree, _ := benchTrees(b)
	storage, err := artifact.NewStorage(b.TempDir(), "http://localhost")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		listing, err := gittree.List(tree, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		a, err := storage.Store(fmt.Sprintf("gitrepository/ns/n%d", i), "main@sha1:x", listing.Files(tree))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := storage.Dir(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTreeFiles lists the same commit's files with Flux's exclusion
// rules, the step of every push before the artifact is written, when
// there is no listing of the previous commit: the first fetch, or after a
// restart.
func BenchmarkTreeFiles(b *testing.B) {
	tree, _ := benchTrees(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := gittree.List(tree, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextTreeFiles lists the files of a commit that changed one
// file of the first, from the first's listing: a push.
func BenchmarkNextTreeFiles(b *testing.B) {
	from, to := benchTrees(b)
	listing, err := gittree.List(from, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := listing.Next(from, to, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTrees are the trees of a commit of 1000 directories of 4 small
// files each, and of a second commit that changes one of them.
func benchTrees(b *testing.B) (first, next *object.Tree) {
	b.Helper()
	dir := b.TempDir()
	for i := 0; i < 1000; i++ {
		for j := 0; j < 4; j++ {
			p := filepath.Join(dir, fmt.Sprintf("app-%04d", i), fmt.Sprintf("f%d.yaml", j))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-%04d-%d\ndata:\n  key: value\n", i, j)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	commit := [][]string{{"add", "-A"}, {"-c", "user.email=b@b", "-c", "user.name=b", "commit", "-q", "-m", "x"}}
	git(b, dir, append([][]string{{"init", "-q", "-b", "main"}}, commit...)...)
	git(b, dir, []string{"tag", "first"})
	if err := os.WriteFile(filepath.Join(dir, "app-0500", "f0.yaml"), []byte("changed\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	git(b, dir, append(commit, []string{"gc", "-q"})...)
	m, err := openMirror(filepath.Join(dir, ".git"), "http://127.0.0.1/unused")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.close)
	return treeAt(b, m, "refs/tags/first"), treeAt(b, m, "HEAD")
}

func git(b *testing.B, dir string, commands ...[]string) {
	b.Helper()
	for _, args := range commands {
		if _, err := gitserver.Run(dir, args...); err != nil {
			b.Fatal(err)
		}
	}
}

func treeAt(b *testing.B, m *mirror, ref string) *object.Tree {
	b.Helper()
	hash, err := m.repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		b.Fatal(err)
	}
	commit, err := m.repo.CommitObject(*hash)
	if err != nil {
		b.Fatal(err)
	}
	tree, err := commit.Tree()
	if err != nil {
		b.Fatal(err)
	}
	return tree
}

// BenchmarkStorePush stores the artifact of a commit that changed one file
// of the one before, as a push does: listed from the change, written into
// the tree garbage collection set aside.
func BenchmarkStorePush(b *testing.B) {
	from, to := benchTrees(b)
	storage, err := artifact.NewStorage(b.TempDir(), "http://localhost")
	if err != nil {
		b.Fatal(err)
	}
	listing, err := gittree.List(from, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	trees := []*object.Tree{from, to}
	var kept []*meta.Artifact
	store := func(i int) {
		tree := trees[i%2]
		next, _, err := listing.Next(trees[(i+1)%2], tree, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		listing = next
		// A file of its own makes each revision's artifact new, as every
		// push's is.
		files := append(listing.Files(tree), artifact.File{Path: "revision", Open: func() (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(strconv.Itoa(i))), nil
		}})
		a, err := storage.Store("gitrepository/ns/push", fmt.Sprintf("main@sha1:%d", i), files)
		if err != nil {
			b.Fatal(err)
		}
		// The reconciler keeps the new artifact and the previous one.
		kept = append(kept, a)
		if len(kept) > 2 {
			kept = kept[1:]
		}
		if err := storage.GarbageCollect("gitrepository/ns/push", kept...); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		store(i)
	}
	b.ResetTimer()
	for i := 3; i < b.N+3; i++ {
		store(i)
	}
}
