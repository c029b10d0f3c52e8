package gittree_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/utils/ptr"

	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// gitIn runs the git command line in dir, as a user would commit.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.email=t@strata.dev", "-c", "user.name=t"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestListingFollowsEachCommit: from one commit's listing and the changes
// to the next, the next listing holds what listing the next commit anew
// holds, under every rule, through every kind of change; and the changed
// paths are those go-git's own tree diff names.
func TestListingFollowsEachCommit(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"apps/a/deploy.yaml": "a", "apps/a/notes.txt": "n", "apps/b/cm.yaml": "b",
		"infra/x.yaml": "x", "infra/deep/y/z.yaml": "z", "top.yaml": "t", "file-then-dir": "f",
	})
	gitIn(t, dir, "init", "-q", "-b", "main")
	steps := []struct {
		name   string
		change func()
	}{
		{"a file changed", func() { writeFiles(t, dir, map[string]string{"apps/a/deploy.yaml": "a2"}) }},
		{"files added in new directories", func() {
			writeFiles(t, dir, map[string]string{"apps/c/new/one.yaml": "1", "apps/c/two.txt": "2"})
		}},
		{"a directory removed", func() { rm(t, dir, "infra/deep") }},
		{"a file made a directory", func() {
			rm(t, dir, "file-then-dir")
			writeFiles(t, dir, map[string]string{"file-then-dir/inside.yaml": "i"})
		}},
		{"a directory made a file", func() {
			rm(t, dir, "apps/b")
			writeFiles(t, dir, map[string]string{"apps/b": "now a file"})
		}},
		{"a file made executable", func() { chmod(t, dir, "top.yaml", 0o755) }},
		{"a symbolic link added", func() {
			if err := os.Symlink("top.yaml", filepath.Join(dir, "apps/link.yaml")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file renamed", func() { gitIn(t, dir, "mv", "infra/x.yaml", "apps/x.yaml") }},
		{"a gitlink added", func() {
			gitIn(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 20)+",apps/sub")
		}},
		{"a .sourceignore added", func() { writeFiles(t, dir, map[string]string{"apps/.sourceignore": "*.txt\n"}) }},
		{"a file the .sourceignore leaves out changed", func() { writeFiles(t, dir, map[string]string{"apps/a/notes.txt": "n2"}) }},
		{"the .sourceignore removed", func() { rm(t, dir, "apps/.sourceignore") }},
		{"nothing changed", func() {}},
	}
	rules := []struct {
		name       string
		specIgnore *string
		sparse     []string
	}{
		{"no rules", nil, nil},
		{"spec.ignore", ptr.To("*.txt\n!apps/a/notes.txt\n/infra/\n"), nil},
		{"a sparse checkout", nil, []string{"apps"}},
	}
	repo := openRepo(t, dir)
	from := commitStep(t, dir, repo)
	last := make([]*gittree.Listing, len(rules))
	for i, r := range rules {
		l, err := gittree.List(from, r.specIgnore, r.sparse)
		if err != nil {
			t.Fatal(err)
		}
		last[i] = l
	}
	for _, step := range steps {
		step.change()
		to := commitStep(t, dir, repo)
		want := goGitDiff(t, from, to)
		for i, r := range rules {
			next, changed, err := last[i].Next(from, to, r.specIgnore, r.sparse)
			if err != nil {
				t.Fatalf("%s, %s: %v", step.name, r.name, err)
			}
			if got := sorted(changed); !slices.Equal(got, want) {
				t.Errorf("%s, %s: changed %v, go-git's diff %v", step.name, r.name, got, want)
			}
			anew, err := gittree.Files(to, r.specIgnore, r.sparse)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := contents(t, next.Files(to)), contents(t, anew); !slices.Equal(got, want) {
				t.Errorf("%s, %s: listed from the changes\n%v\nlisted anew\n%v", step.name, r.name, got, want)
			}
			last[i] = next
		}
		from = to
	}
}

func rm(t *testing.T, dir, p string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, dir, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(filepath.Join(dir, p), mode); err != nil {
		t.Fatal(err)
	}
}

func openRepo(t *testing.T, dir string) *gogit.Repository {
	t.Helper()
	repo, err := gogit.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// commitStep commits the working tree with git and returns its tree.
func commitStep(t *testing.T, dir string, repo *gogit.Repository) *object.Tree {
	t.Helper()
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "step")
	return treeOf(t, repo, plumbing.NewHash(gitIn(t, dir, "rev-parse", "HEAD")))
}

// goGitDiff are the paths go-git's tree diff names, sorted, once each.
func goGitDiff(t *testing.T, from, to *object.Tree) []string {
	t.Helper()
	changes, err := object.DiffTree(from, to)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range changes {
		out = append(out, c.From.Name, c.To.Name)
	}
	return sorted(out)
}

func sorted(paths []string) []string {
	out := slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return p == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// contents are the files as "path mode content", in path order.
func contents(t *testing.T, files []artifact.File) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join([]string{f.Path, map[bool]string{true: "x", false: "-"}[f.Executable], string(data)}, " "))
	}
	slices.Sort(out)
	return out
}
