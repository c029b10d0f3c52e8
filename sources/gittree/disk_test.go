package gittree_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/strata-gitops/strata/sources/gittree"
)

// commitOnDisk writes files into a new repository at dir, commits them and
// returns the commit's tree.
func commitOnDisk(t *testing.T, dir string, files map[string]string) *object.Tree {
	t.Helper()
	repo, err := gogit.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, files)
	return commitAll(t, repo)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDiskFilesAreWhatACommitWouldHold: a clean working tree gives the
// files its commit gives, under every rule; then files git ignores are
// left out and untracked ones are in, as committing them would make it.
func TestDiskFilesAreWhatACommitWouldHold(t *testing.T) {
	dir := t.TempDir()
	tr := commitOnDisk(t, dir, map[string]string{
		"apps/app.yaml":           "a",
		"apps/.sourceignore":      "*.enc\n",
		"apps/secret.enc":         "x",
		"other/secret.enc":        "x",
		".github/workflows/a.yml": "x",
		"docs/readme.md":          "x",
		"clusters/prod/ks.yaml":   "k",
		".gitignore":              "*.tmp\nlocal/\n",
	})
	if err := os.Symlink("app.yaml", filepath.Join(dir, "apps", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	ignore := "docs/\n"
	for _, rules := range []struct {
		ignore *string
		sparse []string
	}{{nil, nil}, {&ignore, nil}, {nil, []string{"clusters/prod", "apps"}}} {
		committed, err := gittree.Files(tr, rules.ignore, rules.sparse)
		if err != nil {
			t.Fatal(err)
		}
		onDisk, err := gittree.DiskFiles(dir, rules.ignore, rules.sparse)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := names(onDisk), names(committed); !slices.Equal(got, want) {
			t.Errorf("ignore %v, sparse %q: the clean working tree gives %q, its commit %q", rules.ignore, rules.sparse, got, want)
		}
	}

	writeFiles(t, dir, map[string]string{
		"apps/new.yaml":       "untracked, committed by git add --all",
		"apps/scratch.tmp":    "git ignores it",
		"local/secret.yaml":   "git ignores the directory",
		"apps/.gitignore":     "draft.yaml\n",
		"apps/draft.yaml":     "git ignores it from its own directory",
		".git/info/exclude":   "mine.yaml\n",
		"clusters/mine.yaml":  "excluded by .git/info/exclude",
		"apps/drafts/ok.yaml": "draft.yaml matches a name, not this",
	})
	onDisk, err := gittree.DiskFiles(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := names(onDisk)
	for _, in := range []string{"apps/new.yaml", "apps/drafts/ok.yaml", "apps/app.yaml"} {
		if !slices.Contains(got, in) {
			t.Errorf("%s is not among the working tree's files %q", in, got)
		}
	}
	for _, out := range []string{"apps/scratch.tmp", "local/secret.yaml", "apps/draft.yaml", "clusters/mine.yaml", "apps/secret.enc", "apps/link.yaml"} {
		if slices.Contains(got, out) {
			t.Errorf("%s is among the working tree's files %q", out, got)
		}
	}

	// Files git tracks stay in where an ignore pattern matches them, in an
	// ignored directory too: git commits them. What git commits next is
	// what the working tree gave.
	writeFiles(t, dir, map[string]string{"local/kept.yaml": "force-added", "apps/kept.tmp": "force-added"})
	gitIn(t, dir, "add", "--force", "local/kept.yaml", "apps/kept.tmp")
	onDisk, err = gittree.DiskFiles(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"local/kept.yaml", "apps/kept.tmp"} {
		if !slices.Contains(names(onDisk), in) {
			t.Errorf("the tracked %s is not among the working tree's files %q", in, names(onDisk))
		}
	}
	gitIn(t, dir, "add", "--all")
	gitIn(t, dir, "commit", "-q", "-m", "what the working tree holds")
	committed, err := gittree.Files(treeOf(t, openRepo(t, dir), plumbing.NewHash(gitIn(t, dir, "rev-parse", "HEAD"))), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(onDisk), names(committed); !slices.Equal(got, want) {
		t.Errorf("the working tree gave\n%q\nits commit holds\n%q", got, want)
	}
}

// TestADamagedIndexIsNamed: a git index that cannot be read fails the
// listing, naming the file and what to do, rather than leaving out what
// git tracks.
func TestADamagedIndexIsNamed(t *testing.T) {
	dir := t.TempDir()
	commitOnDisk(t, dir, map[string]string{"apps/app.yaml": "a"})
	index := filepath.Join(dir, ".git", "index")
	if err := os.WriteFile(index, []byte("not an index"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := gittree.DiskFiles(dir, nil, nil)
	if err == nil || !strings.Contains(err.Error(), index) || !strings.Contains(err.Error(), "git status") {
		t.Fatalf("a damaged index gave %v, want an error naming %s and what to do", err, index)
	}
}
