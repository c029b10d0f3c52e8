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

// TestTheUsersExcludesFileIsRead: files the user's excludes file ignores
// (core.excludesFile, or git's default under the XDG configuration
// directory) are left out, as `git add --all` leaves them out; the
// repository's own setting wins over the user's, and a .gitignore's
// negation over both.
func TestTheUsersExcludesFileIsRead(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := t.TempDir()
	commitOnDisk(t, dir, map[string]string{"apps/app.yaml": "a"})
	untracked := map[string]string{
		"apps/notes.scratch":  "the default excludes file ignores it",
		"apps/plan.mine":      "the configured one ignores it",
		"apps/repo.local":     "the repository's excludes file ignores it",
		"apps/keep.mine":      "a .gitignore takes it back",
		"apps/.gitignore":     "!keep.mine\n",
		"apps/deploy.yaml":    "in",
		"clusters/app.yaml":   "in",
		"clusters/a.scratch2": "in: a pattern of no excludes file in use",
	}
	writeFiles(t, home, map[string]string{
		".config/git/ignore": "*.scratch\n",
		"mine":               "*.mine\n",
		"repo-excludes":      "*.local\n*.scratch2\n",
	})
	writeFiles(t, dir, untracked)

	check := func(when string) {
		t.Helper()
		onDisk, err := gittree.DiskFiles(dir, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		// What real git would commit from the same working tree, but for
		// the .gitignore files an artifact leaves out.
		var want []string
		for _, line := range strings.Split(gitIn(t, dir, "add", "--all", "--dry-run"), "\n") {
			if p, ok := strings.CutPrefix(line, "add '"); ok && filepath.Base(p) != ".gitignore'" {
				want = append(want, strings.TrimSuffix(p, "'"))
			}
		}
		want = append(want, "apps/app.yaml")
		slices.Sort(want)
		if got := names(onDisk); !slices.Equal(got, want) {
			t.Errorf("%s: the working tree gives\n%q\ngit add --all would add\n%q", when, got, want)
		}
	}
	check("the default excludes file")
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\texcludesFile = ~/mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("core.excludesFile in ~/.gitconfig")
	gitIn(t, dir, "config", "core.excludesFile", filepath.Join(home, "repo-excludes"))
	check("core.excludesFile in the repository's configuration")

	// A configuration git could not read either stops the listing, named.
	broken := filepath.Join(home, ".gitconfig")
	if err := os.WriteFile(broken, []byte("[core\n\texcludesFile = ~/mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gittree.DiskFiles(dir, nil, nil); err == nil || !strings.Contains(err.Error(), broken) {
		t.Errorf("a broken %s: %v, want an error naming it", broken, err)
	}
}
