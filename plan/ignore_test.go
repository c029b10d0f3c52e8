package plan_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// TestPlanSeesWhatTheArtifactHolds: files a source artifact leaves out
// (.sourceignore, Flux's default exclusions) are not rendered, as the
// engine never sees them; the files it holds are.
func TestPlanSeesWhatTheArtifactHolds(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("ignored", map[string]string{
		"apps/.sourceignore":   "drafts/\n",
		"apps/drafts/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: draft\n  namespace: databases\n",
		"apps/.github/ci.yaml": "on: push\njobs: {}\n",
		"apps/kept/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: databases\n",
	})
	p := run(t, r, "ignored", false)
	if len(p.Errors) > 0 {
		t.Fatalf("errors: %v", p.Errors)
	}
	got := changesOf(p)
	if want := "apps created ConfigMap/databases/kept"; !strings.Contains(got, want) || strings.Contains(got, "draft") {
		t.Errorf("changes:\n%s\nwant %q and nothing of apps/drafts", got, want)
	}
}

// TestPlanSeesTheSourcesOwnRules: the GitRepository's spec.ignore, as the
// revision declares it where `flux bootstrap` keeps it, leaves files out of
// the artifact, so the plan does not render them either. A change to the
// rules alone changes no file a Kustomization reads, yet what it renders:
// a changed-only plan renders everything then.
func TestPlanSeesTheSourcesOwnRules(t *testing.T) {
	files := fixture()
	files["monitoring/alerts.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: alerts\n  namespace: flux-system\n"
	r := newRepo(t, files)
	sync := func(ignore string) string { return gotkSync("  ignore: |\n    " + ignore + "\n") }
	r.branch("rules", map[string]string{
		"clusters/homelab/flux-system/gotk-sync.yaml": sync("/apps/drafts/"),
		"apps/drafts/cm.yaml":                         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: draft\n  namespace: databases\n",
		"apps/kept/cm.yaml":                           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: databases\n",
	})
	for _, changedOnly := range []bool{false, true} {
		p := run(t, r, "rules", changedOnly)
		if len(p.Errors) > 0 {
			t.Fatalf("errors: %v", p.Errors)
		}
		got := changesOf(p)
		for _, want := range []string{"apps created ConfigMap/databases/kept", "created GitRepository.source.toolkit.fluxcd.io/flux-system/flux-system"} {
			if !strings.Contains(got, want) || strings.Contains(got, "draft") {
				t.Errorf("changed-only %v: changes:\n%s\nwant %q and nothing of apps/drafts", changedOnly, got, want)
			}
		}
	}

	r.branch("rules-only", map[string]string{"clusters/homelab/flux-system/gotk-sync.yaml": sync("/storage/pv.yaml\n    /monitoring/alerts.yaml")})
	for _, changedOnly := range []bool{false, true} {
		p := run(t, r, "rules-only", changedOnly)
		for _, object := range []string{"PersistentVolume/node-1-nvme1", "ConfigMap/flux-system/alerts"} {
			if c, ok := findChange(p, object); !ok || c.Action != plan.Deleted {
				t.Errorf("changed-only %v: %s, which the new spec.ignore leaves out, is not planned as deleted: %+v\n%s", changedOnly, object, c, changesOf(p))
			}
		}
	}
}

// TestWorktreeSeesWhatACommitWouldHold: a WORKTREE plan renders what
// committing the working tree would put in the artifact: an untracked
// manifest is in; one git ignores, or one the artifact's rules leave out,
// is not.
func TestWorktreeSeesWhatACommitWouldHold(t *testing.T) {
	r := newRepo(t, fixture())
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: databases\n"
	}
	for name, content := range map[string]string{
		"apps/new.yaml":           cm("new"),
		".gitignore":              "apps/local/\n",
		"apps/local/mine.yaml":    cm("mine"),
		"apps/.sourceignore":      "drafts/\n",
		"apps/drafts/draft.yaml":  cm("draft"),
		"apps/.github/ci.yaml":    "on: push\n",
		"apps/.gitlab-ci.yml":     "stages: []\n",
		"infrastructure/new.yaml": cm("infra"),
	} {
		full := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := plan.Run(context.Background(), plan.Options{
		RepoDir: r.dir, Base: "main", Head: plan.WorkTree, Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "flux-system"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) > 0 {
		t.Fatalf("errors: %v", p.Errors)
	}
	got := changesOf(p)
	for _, want := range []string{"apps created ConfigMap/databases/new", "infrastructure created ConfigMap/databases/infra"} {
		if !strings.Contains(got, want) {
			t.Errorf("changes:\n%s\nwant %q", got, want)
		}
	}
	for _, left := range []string{"mine", "draft"} {
		if strings.Contains(got, "ConfigMap/databases/"+left) {
			t.Errorf("changes:\n%s\nwant nothing of %s", got, left)
		}
	}
}

// TestPlanDoesNotGuessIncludedFiles: a Kustomization that reads a
// directory spec.include fills is not rendered from what this repository
// alone holds there (its objects would read as deleted); the plan says
// why instead.
func TestPlanDoesNotGuessIncludedFiles(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("include", map[string]string{"clusters/homelab/flux-system/gotk-sync.yaml": gotkSync(`  include:
    - repository:
        name: shared
      toPath: ./apps
`)})
	p := run(t, r, "include", false)
	if p.Summary.Deleted != 0 {
		t.Errorf("the included directory's objects read as deleted:\n%s", changesOf(p))
	}
	if !strings.Contains(strings.Join(p.Errors, "\n"), "spec.include") {
		t.Errorf("errors %v do not say that apps reads an included directory", p.Errors)
	}
}

// gotkSync is the repository's own GitRepository, as flux bootstrap
// writes it, with spec ending in tail.
func gotkSync(tail string) string {
	return `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m
  url: https://git.example/cluster.git
` + tail
}

// TestPlanDoesNotGuessSubmodules: with spec.recurseSubmodules, a
// Kustomization whose directory holds a submodule is not rendered without
// it; the plan names the submodule's path.
func TestPlanDoesNotGuessSubmodules(t *testing.T) {
	r := newRepo(t, fixture())
	r.git("checkout", "-q", "-b", "submodule", "main")
	r.commitGitlinks(map[string]string{"clusters/homelab/flux-system/gotk-sync.yaml": gotkSync("  recurseSubmodules: true\n")}, "apps/vendor")
	r.git("checkout", "-q", "main")
	p := run(t, r, "submodule", false)
	if p.Summary.Deleted != 0 {
		t.Errorf("objects read as deleted:\n%s", changesOf(p))
	}
	if errs := strings.Join(p.Errors, "\n"); !strings.Contains(errs, "apps/vendor") || !strings.Contains(errs, "submodule") {
		t.Errorf("errors %v do not say that apps holds a submodule", p.Errors)
	}
}

// TestUnchangedSubmodulesKeepChangedOnly: the same submodules on both
// sides are the same rules, so a changed-only plan still skips what did
// not change.
func TestUnchangedSubmodulesKeepChangedOnly(t *testing.T) {
	r := newRepo(t, fixture())
	r.commitGitlinks(map[string]string{"clusters/homelab/flux-system/gotk-sync.yaml": gotkSync("  recurseSubmodules: true\n")},
		"vendor/a", "vendor/b", "vendor/c", "vendor/d")
	r.branch("bump", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi"))
	// Several plans: submodules listed in map order differed between the
	// sides in most, not all, of them.
	for range 5 {
		for _, ks := range run(t, r, "bump", true).Kustomizations {
			if ks.Name == "monitoring" && ks.Status != "skipped" {
				t.Fatalf("monitoring, untouched, is %q (%s) in a changed-only plan; want skipped", ks.Status, ks.Reason)
			}
		}
	}
}

// commitGitlinks commits files and a submodule gitlink at each of paths
// (pointing at the current commit), staged by hand: "git add -A" drops a
// gitlink without a directory. Each gets the empty directory git leaves
// for a submodule not checked out, so that later commits keep it.
func (r *repo) commitGitlinks(files map[string]string, paths ...string) {
	r.t.Helper()
	head := r.git("rev-parse", "HEAD")
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.git("add", name)
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Join(r.dir, p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		r.git("update-index", "--add", "--cacheinfo", "160000,"+head+","+p)
	}
	r.git("commit", "-q", "-m", "gitlinks")
}
