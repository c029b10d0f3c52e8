package gittree_test

import (
	"slices"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// tree commits files (and symbolic links, path -> target) in memory and
// returns the commit's tree.
func tree(t *testing.T, files, links map[string]string) *object.Tree {
	t.Helper()
	fs := memfs.New()
	repo, err := gogit.Init(memory.NewStorage(), fs)
	if err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		f, err := fs.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for p, target := range links {
		if err := fs.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	return commitAll(t, repo)
}

// commitAll commits every file of repo's working tree and returns the
// commit's tree.
func commitAll(t *testing.T, repo *gogit.Repository) *object.Tree {
	t.Helper()
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	hash, err := wt.Commit("x", &gogit.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@strata.dev", When: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return treeOf(t, repo, hash)
}

// treeOf is the tree of repo's commit hash.
func treeOf(t *testing.T, repo *gogit.Repository, hash plumbing.Hash) *object.Tree {
	t.Helper()
	c, err := repo.CommitObject(hash)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func paths(t *testing.T, tr *object.Tree, specIgnore *string, sparse []string) []string {
	t.Helper()
	files, err := gittree.Files(tr, specIgnore, sparse)
	if err != nil {
		t.Fatal(err)
	}
	return names(files)
}

// names are the files' paths, sorted.
func names(files []artifact.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return out
}

// TestFilesFollowFluxsRules: Flux's default exclusions, each .sourceignore
// in its own directory, the spec's ignore block and a sparse checkout
// decide what an artifact holds; symbolic links never are in it.
func TestFilesFollowFluxsRules(t *testing.T) {
	tr := tree(t, map[string]string{
		"apps/app.yaml":           "a",
		"apps/.sourceignore":      "*.enc\n",
		"apps/secret.enc":         "x",
		"other/secret.enc":        "x",
		".github/workflows/a.yml": "x",
		"apps/.github/ci.yaml":    "x",
		"docs/readme.md":          "x",
		"clusters/prod/ks.yaml":   "k",
		"logo.png":                "x",
	}, map[string]string{"apps/link.yaml": "app.yaml"})
	all := []string{"apps/.sourceignore", "apps/app.yaml", "clusters/prod/ks.yaml", "docs/readme.md", "other/secret.enc"}
	if got := paths(t, tr, nil, nil); !slices.Equal(got, all) {
		t.Errorf("default rules: %q, want %q", got, all)
	}
	ignore := "docs/\n"
	if got, want := paths(t, tr, &ignore, nil), slices.DeleteFunc(slices.Clone(all), func(p string) bool { return p == "docs/readme.md" }); !slices.Equal(got, want) {
		t.Errorf("with spec.ignore %q: %q, want %q", ignore, got, want)
	}
	if got, want := paths(t, tr, nil, []string{"./clusters/prod/", "apps"}), []string{"apps/.sourceignore", "apps/app.yaml", "clusters/prod/ks.yaml"}; !slices.Equal(got, want) {
		t.Errorf("sparse: %q, want %q", got, want)
	}
	if got := paths(t, tr, nil, []string{"/"}); !slices.Equal(got, all) {
		t.Errorf("sparse on the root: %q, want everything %q", got, all)
	}
}
