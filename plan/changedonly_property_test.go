package plan_test

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/risk"
)

// genRepo is a generated repository: a root with an "apps" Kustomization
// whose kustomization.yaml lists one Flux Kustomization per app (and may
// patch them all), each app's directory with a ConfigMap, for some a
// claim, and for some a shared component.
type genRepo struct {
	apps     int
	listed   map[int]bool   // in apps/kustomization.yaml
	names    map[int]string // metadata.name of app i's Kustomization
	dirs     map[int]string // its spec.path
	values   map[int]int    // its ConfigMap's value
	deleted  map[int]bool   // its Kustomization's file is gone
	patch    string         // the parent's patch of every app: its interval
	labelVal string         // the shared component's label
}

func newGenRepo(apps int) *genRepo {
	g := &genRepo{apps: apps, listed: map[int]bool{}, names: map[int]string{}, dirs: map[int]string{}, values: map[int]int{},
		deleted: map[int]bool{}, patch: "10m", labelVal: "one"}
	for i := 1; i <= apps; i++ {
		g.listed[i], g.names[i], g.dirs[i] = true, fmt.Sprintf("app-%d", i), fmt.Sprintf("src/app-%d", i)
	}
	return g
}

func (g *genRepo) clone() *genRepo {
	c := *g
	c.listed, c.names, c.dirs, c.values, c.deleted = copyMap(g.listed), copyMap(g.names), copyMap(g.dirs), copyMap(g.values), copyMap(g.deleted)
	return &c
}

func copyMap[V any](m map[int]V) map[int]V {
	out := make(map[int]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// files writes the repository; the files of the previous state that are
// no longer written are given as "" (deleted).
func (g *genRepo) files(previous map[string]string) map[string]string {
	f := map[string]string{
		"clusters/homelab/apps.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
`,
		"components/common/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nlabels:\n- pairs: {tier: " + g.labelVal + "}\n",
	}
	var listed []string
	for i := 1; i <= g.apps; i++ {
		if !g.deleted[i] {
			f[fmt.Sprintf("apps/app-%d.yaml", i)] = fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %s, namespace: flux-system}
spec:
  interval: 10m
  path: ./%s
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
`, g.names[i], g.dirs[i])
			if g.listed[i] {
				listed = append(listed, fmt.Sprintf("app-%d.yaml", i))
			}
		}
		resources := "- cm.yaml\n"
		if i%3 == 0 {
			resources += "- claim.yaml\n"
			f[g.dirs[i]+"/claim.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: ns-%d}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n", i)
		}
		components := ""
		if i%2 == 0 {
			components = "components:\n- " + strings.Repeat("../", strings.Count(g.dirs[i], "/")+1) + "components/common\n"
		}
		f[g.dirs[i]+"/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n" + resources + components
		f[g.dirs[i]+"/cm.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: ns-%d}\ndata: {value: \"%d\"}\n", i, g.values[i])
	}
	sort.Strings(listed)
	f["apps/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + strings.Join(listed, "\n- ") +
		"\npatches:\n- target: {kind: Kustomization}\n  patch: |\n    - op: replace\n      path: /spec/interval\n      value: " + g.patch + "\n"
	for name := range previous {
		if _, ok := f[name]; !ok {
			f[name] = ""
		}
	}
	return f
}

// mutate makes one to three random changes of the kinds a pull request
// makes: edits, moves, unlisting, renames, deletions, component and patch
// changes.
func (g *genRepo) mutate(rng *rand.Rand) []string {
	var did []string
	for n := 1 + rng.Intn(3); n > 0; n-- {
		i := 1 + rng.Intn(g.apps)
		switch rng.Intn(7) {
		case 0:
			g.values[i]++
			did = append(did, fmt.Sprintf("edit app-%d", i))
		case 1:
			g.dirs[i] = fmt.Sprintf("moved/%d/app-%d", rng.Intn(1000), i)
			did = append(did, fmt.Sprintf("move app-%d", i))
		case 2:
			g.listed[i] = !g.listed[i]
			did = append(did, fmt.Sprintf("list/unlist app-%d", i))
		case 3:
			g.names[i] = fmt.Sprintf("app-%d-r%d", i, rng.Intn(1000))
			did = append(did, fmt.Sprintf("rename app-%d", i))
		case 4:
			g.deleted[i] = !g.deleted[i]
			did = append(did, fmt.Sprintf("delete/restore app-%d", i))
		case 5:
			g.labelVal += "x"
			did = append(did, "component change")
		case 6:
			g.patch = []string{"5m", "10m", "15m", "20m"}[rng.Intn(4)]
			did = append(did, "patch change")
		}
	}
	return did
}

// everyChange is every change a plan lists, sorted, whatever
// Kustomization lists it, and its exit codes.
func everyChange(p *plan.Plan) (string, string) {
	var lines []string
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			lines = append(lines, fmt.Sprintf("%s %s %s %s", ch.Object, ch.Action, ch.Risk, ch.MovedFrom))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), fmt.Sprintf("exit %d (changes), %d (destructive)", p.ExitCode("changes"), p.ExitCode("destructive"))
}

// On random changes to a generated repository of 60 Kustomizations,
// --changed-only lists exactly the changes of the full plan, with its
// exit codes (issue #42, defect 1).
func TestChangedOnlyIsExact(t *testing.T) {
	const apps, cases = 60, 12
	base := newGenRepo(apps)
	files := base.files(nil)
	r := newRepo(t, files)
	rng := rand.New(rand.NewSource(42))
	var heads []string
	var did [][]string
	for c := range cases {
		head := base.clone()
		did = append(did, head.mutate(rng))
		name := fmt.Sprintf("change-%d", c)
		r.branch(name, head.files(files))
		heads = append(heads, name)
	}
	for c, head := range heads {
		t.Run(strings.Join(did[c], ", "), func(t *testing.T) {
			full := runGen(t, r, head, false)
			changedOnly := runGen(t, r, head, true)
			fc, fe := everyChange(full)
			cc, ce := everyChange(changedOnly)
			if fc != cc || fe != ce {
				t.Errorf("--changed-only differs from the full plan:\nfull (%s):\n%s\n\nchanged-only (%s):\n%s", fe, fc, ce, cc)
			}
			skipped := 0
			for _, ks := range changedOnly.Kustomizations {
				if ks.Status == "skipped" {
					skipped++
				}
			}
			// A patch of every app changes every app's spec: all render.
			if !slices.Contains(did[c], "patch change") && skipped < apps/3 {
				t.Errorf("--changed-only skipped %d of %d Kustomizations: it renders more than the change needs", skipped, len(changedOnly.Kustomizations))
			}
		})
	}
}

func runGen(t *testing.T, r *repo, head string, changedOnly bool) *plan.Plan {
	t.Helper()
	return noErrors(t, run(t, r, head, changedOnly))
}

// skippedIn counts the Kustomizations a changed-only plan skipped.
func skippedIn(p *plan.Plan) int {
	n := 0
	for _, ks := range p.Kustomizations {
		if ks.Status == "skipped" {
			n++
		}
	}
	return n
}

// One Kustomization that substitutes from a Secret only the cluster holds
// costs only itself: the others stay skipped (issue #42, defect 2).
func TestAClusterOnlySubstitutionCostsOnlyItself(t *testing.T) {
	g := newGenRepo(40)
	files := g.files(nil)
	files["apps/app-7.yaml"] = strings.Replace(files["apps/app-7.yaml"], "  prune: true\n",
		"  prune: true\n  postBuild:\n    substituteFrom:\n    - {kind: Secret, name: cluster-only-secrets}\n", 1)
	r := newRepo(t, files)
	head := g.clone()
	head.values[12]++
	changed := head.files(files)
	changed["apps/app-7.yaml"] = files["apps/app-7.yaml"]
	r.branch("edit", changed)
	full, only := runGen(t, r, "edit", false), runGen(t, r, "edit", true)
	fc, fe := everyChange(full)
	cc, ce := everyChange(only)
	if fc != cc || fe != ce {
		t.Errorf("--changed-only differs from the full plan:\n%s\n%s\n\n%s\n%s", fe, fc, ce, cc)
	}
	if n := skippedIn(only); n < 35 {
		t.Errorf("--changed-only skipped %d of %d Kustomizations; one cluster-only substitution should cost only itself", n, len(only.Kustomizations))
	}
}

// --head WORKTREE with --changed-only skips what the same tree as a
// commit skips, with the same changes (issue #42, defect 4).
func TestChangedOnlyWorksOnTheWorkTree(t *testing.T) {
	g := newGenRepo(30)
	files := g.files(nil)
	r := newRepo(t, files)
	head := g.clone()
	head.values[5]++
	head.listed[9] = false
	changed := head.files(files)
	r.branch("edit", changed)
	for name, content := range changed {
		r.write(name, content)
	}
	committed := runGen(t, r, "edit", true)
	worktree := runGen(t, r, plan.WorkTree, true)
	cc, ce := everyChange(committed)
	wc, we := everyChange(worktree)
	if cc != wc || ce != we {
		t.Errorf("WORKTREE plans other changes than the same tree committed:\n%s\n%s\n\n%s\n%s", ce, cc, we, wc)
	}
	if skippedIn(worktree) != skippedIn(committed) || skippedIn(worktree) == 0 {
		t.Errorf("WORKTREE skipped %d, the same tree committed %d", skippedIn(worktree), skippedIn(committed))
	}
}

// An app's Kustomization removed from its parent's kustomization.yaml,
// its own files untouched: --changed-only lists the app's deletions, its
// claim blocked, and exits 2 under --fail-on destructive, as the full
// plan does (issue #42, defect 1).
func TestChangedOnlySeesAnUnlistedApp(t *testing.T) {
	g := newGenRepo(30)
	files := g.files(nil)
	r := newRepo(t, files)
	head := g.clone()
	head.listed[3] = false // app-3 holds a claim
	r.branch("unlist", head.files(files))
	for _, changedOnly := range []bool{false, true} {
		p := runGen(t, r, "unlist", changedOnly)
		ch, ok := findChange(p, "PersistentVolumeClaim/ns-3/data")
		if !ok || ch.Action != plan.Deleted || ch.Risk != risk.Blocked {
			t.Errorf("changed-only %v: the unlisted app's claim is %+v, want deleted and blocked", changedOnly, ch)
		}
		if code := p.ExitCode("destructive"); code != plan.ExitDestructive {
			t.Errorf("changed-only %v: exit %d under --fail-on destructive, want %d", changedOnly, code, plan.ExitDestructive)
		}
	}
}
