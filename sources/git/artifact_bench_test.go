package git

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/strata-gitops/strata/internal/local/gitserver"
	"github.com/strata-gitops/strata/sources/artifact"
)

// BenchmarkArtifact stores and extracts the artifact of a commit with
// 4000 small files, the bench's repository, which is what a push waits for
// before any Kustomization can apply.
func BenchmarkArtifact(b *testing.B) {
	commit := benchCommit(b)
	storage, err := artifact.NewStorage(b.TempDir(), "http://localhost")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		files, err := treeFiles(commit, nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		a, err := storage.Store(fmt.Sprintf("gitrepository/ns/n%d", i), "main@sha1:x", files)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := storage.Dir(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTreeFiles lists the same commit's files with Flux's exclusion
// rules, the step of every push before the artifact is written.
func BenchmarkTreeFiles(b *testing.B) {
	commit := benchCommit(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := treeFiles(commit, nil, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCommit is a commit of 1000 directories of 4 small files each.
func benchCommit(b *testing.B) *object.Commit {
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
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.email=b@b", "-c", "user.name=b", "commit", "-q", "-m", "x"}, {"gc", "-q"}} {
		if _, err := gitserver.Run(dir, args...); err != nil {
			b.Fatal(err)
		}
	}
	m, err := openMirror(filepath.Join(dir, ".git"), "http://127.0.0.1/unused")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.close)
	head, err := m.repo.Head()
	if err != nil {
		b.Fatal(err)
	}
	commit, err := m.repo.CommitObject(head.Hash())
	if err != nil {
		b.Fatal(err)
	}
	return commit
}
