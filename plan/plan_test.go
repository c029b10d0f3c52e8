package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/report"
	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/graph"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func run(t *testing.T, r *repo, head string, changedOnly bool) *plan.Plan {
	t.Helper()
	return planOf(t, r, head, func(o *plan.Options) { o.ChangedOnly = changedOnly })
}

// planOf plans head against main of the fixture's layout under strata's
// engine, with the options edit changes.
func planOf(t *testing.T, r *repo, head string, edit func(*plan.Options)) *plan.Plan {
	t.Helper()
	o := plan.Options{RepoDir: r.dir, Base: "main", Head: head, Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}, Engine: risk.Strata}
	if edit != nil {
		edit(&o)
	}
	p, err := plan.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// noErrors fails the test on a plan's errors.
func noErrors(t *testing.T, p *plan.Plan) *plan.Plan {
	t.Helper()
	if len(p.Errors) > 0 {
		t.Fatalf("errors: %v", p.Errors)
	}
	return p
}

// want is one expected change; reason is a fragment of one of its reasons.
type want struct {
	object, action, risk, reason string
}

// checkWants checks each expected change of the plan and returns the
// changes found.
func checkWants(t *testing.T, p *plan.Plan, wants []want) []plan.Change {
	t.Helper()
	var found []plan.Change
	for _, w := range wants {
		ch, ok := findChange(p, w.object)
		if !ok {
			t.Fatalf("no change of %s in %s", w.object, dump(p))
		}
		if ch.Action != w.action || ch.Risk != w.risk || !strings.Contains(strings.Join(ch.Reasons, "\n"), w.reason) {
			t.Errorf("%s: %s %s %q, want %s %s with %q", w.object, ch.Action, ch.Risk, ch.Reasons, w.action, w.risk, w.reason)
		}
		found = append(found, ch)
	}
	return found
}

func findChange(p *plan.Plan, object string) (plan.Change, bool) {
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			if ch.Object.String() == object {
				return ch, true
			}
		}
	}
	return plan.Change{}, false
}

func TestRiskClasses(t *testing.T) {
	pvcForce := edit(t, "clusters/homelab/apps.yaml", "  prune: true\n", "  prune: true\n  force: true\n")
	pvcForceClass := edit(t, "apps/db.yaml", "storageClassName: local-retain\n  volumeName", "storageClassName: thin\n  volumeName")
	optedIn := edit(t, "clusters/homelab/apps.yaml", "  namespace: flux-system\n", "  namespace: flux-system\n  annotations:\n    strata.dev/allow-data-loss: \"true\"\n")
	optedIn["apps/db.yaml"] = pvcForceClass["apps/db.yaml"]
	optedIn["clusters/homelab/apps.yaml"] = strings.Replace(optedIn["clusters/homelab/apps.yaml"], "  prune: true\n", "  prune: true\n  force: true\n", 1)
	pvcForce["apps/db.yaml"] = pvcForceClass["apps/db.yaml"]
	storageOptIn := edit(t, "clusters/homelab/storage.yaml", "  namespace: flux-system\n", "  namespace: flux-system\n  annotations:\n    strata.dev/allow-data-loss: \"true\"\n")
	storageOptIn["storage/pv.yaml"] = ""

	cases := []struct {
		name  string
		files map[string]string
		want  []want
	}{
		{"claim grows where the class expands", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi"),
			[]want{{"PersistentVolumeClaim/databases/cache", plan.Changed, risk.Safe, "allows expansion"}}},
		{"claim grows where the class does not expand", edit(t, "clusters/homelab/apps.yaml", "db_size: 20Gi", "db_size: 30Gi"),
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, risk.Recreate, "does not allow expansion"},
				{"Kustomization.kustomize.toolkit.fluxcd.io/flux-system/apps", plan.Changed, risk.Safe, ""}}},
		{"claim shrinks", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 1Gi"),
			[]want{{"PersistentVolumeClaim/databases/cache", plan.Changed, risk.Recreate, "refuses to shrink"}}},
		{"immutable claim field without force", pvcForceClass,
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, risk.Recreate, "the apply will fail"}}},
		{"immutable claim field with force is blocked", pvcForce,
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, risk.Blocked, "PersistentVolumeClaim holds data"}}},
		{"immutable claim field with force and opt-in destroys data", optedIn,
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, risk.DestroysData, "carries strata.dev/allow-data-loss"}}},
		{"pruned volume is blocked", map[string]string{"storage/pv.yaml": ""},
			[]want{{"PersistentVolume/node-1-nvme1", plan.Deleted, risk.Blocked, "PersistentVolume holds data"}}},
		{"pruned volume with opt-in destroys data", storageOptIn,
			[]want{{"PersistentVolume/node-1-nvme1", plan.Deleted, risk.DestroysData, "holds data"}}},
		{"reclaim policy Delete on a bound volume", edit(t, "storage/pv.yaml", "Retain", "Delete"),
			[]want{{"PersistentVolume/node-1-nvme1", plan.Changed, risk.DestroysData, "while the volume is bound"}}},
		{"volume node affinity", edit(t, "storage/pv.yaml", "values: [node-1]", "values: [node-2]"),
			[]want{{"PersistentVolume/node-1-nvme1", plan.Changed, risk.Disruptive, "node affinity"}}},
		{"volume source", edit(t, "storage/pv.yaml", "/mnt/disks/nvme1", "/mnt/disks/nvme2"),
			[]want{{"PersistentVolume/node-1-nvme1", plan.Changed, risk.Recreate, "spec.local"}}},
		{"workload claims", edit(t, "apps/db.yaml", "claimName: db-data", "claimName: cache"),
			[]want{{"Deployment.apps/databases/db", plan.Changed, risk.Disruptive, "volume claims change"}}},
		{"device leaves a volume group", edit(t, "infrastructure/lvmcluster.yaml", "paths: [/dev/nvme0n1, /dev/nvme1n1]", "paths: [/dev/nvme0n1]"),
			[]want{{"LVMCluster.storage.strata.dev/local", plan.Changed, risk.DestroysData, "device /dev/nvme1n1 leaves"}}},
		{"wipe turned on", edit(t, "infrastructure/lvmcluster.yaml", "        deviceSelector:\n", "        deviceSelector:\n          forceWipeDevicesAndDestroyAllData: true\n"),
			[]want{{"LVMCluster.storage.strata.dev/local", plan.Changed, risk.DestroysData, "forceWipeDevicesAndDestroyAllData"}}},
		{"storage class parameters", edit(t, "storage/storageclass.yaml", "deviceClass: nvme", "deviceClass: ssd"),
			[]want{{"StorageClass.storage.k8s.io/thin", plan.Changed, risk.Recreate, "parameters cannot change"}}},
		{"namespace holding claims is blocked", edit(t, "infrastructure/namespaces.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: databases\n---\n", ""),
			[]want{{"Namespace/databases", plan.Deleted, risk.Blocked, "still contains PersistentVolumeClaims"}}},
		{"commonMetadata reaches every object", edit(t, "clusters/homelab/monitoring.yaml", "  path: ./monitoring\n", "  path: ./monitoring\n  commonMetadata:\n    labels:\n      team: storage\n"),
			[]want{{"ConfigMap/flux-system/dashboards", plan.Changed, risk.Safe, ""},
				{"Kustomization.kustomize.toolkit.fluxcd.io/flux-system/monitoring", plan.Changed, risk.Safe, ""}}},
		{"not pruned is orphaned", func() map[string]string {
			f := edit(t, "clusters/homelab/storage.yaml", "prune: true", "prune: false")
			f["storage/pv.yaml"] = ""
			return f
		}(), []want{{"PersistentVolume/node-1-nvme1", plan.Orphaned, risk.Safe, "not pruned"}}},
	}
	r := newRepo(t, fixture())
	for i, tc := range cases {
		r.branch(branchName(i), tc.files)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := run(t, r, branchName(i), false)
			if len(p.Errors) > 0 {
				t.Fatalf("errors: %v", p.Errors)
			}
			for _, ch := range checkWants(t, p, tc.want) {
				if ch.Risk == risk.Blocked && ch.OptIn != `strata.dev/allow-data-loss: "true"` {
					t.Errorf("%s is blocked without naming the opt-in: %q", ch.Object, ch.OptIn)
				}
			}
			wantN := 0
			for _, w := range tc.want {
				if !strings.HasPrefix(w.object, "Kustomization.") {
					wantN++
				}
			}
			if got := countChanges(p); got != wantN {
				t.Errorf("%d changes, want %d: %s", got, wantN, dump(p))
			}
		})
	}
}

func branchName(i int) string { return "case-" + string(rune('a'+i)) }

// countChanges counts changed objects other than Kustomizations, whose
// own changes each case's edits cause as well.
func countChanges(p *plan.Plan) int {
	n := 0
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			if ch.Object.Kind != "Kustomization" {
				n++
			}
		}
	}
	return n
}

func dump(p *plan.Plan) string {
	var b bytes.Buffer
	_ = report.WriteText(&b, p, false)
	return b.String()
}

func TestOrderOtherSourcesAndNoChange(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("docs", map[string]string{"README.md": "# cluster\n"})
	p := run(t, r, "docs", false)
	if p.HasChanges() || p.ExitCode("changes") != plan.ExitNoChange {
		t.Fatalf("a change outside every path planned changes: %s", dump(p))
	}
	wantWaves := [][]string{{"flux-system/flux-system", "flux-system/infrastructure", "flux-system/monitoring", "flux-system/podinfo"}, {"flux-system/storage"}, {"flux-system/apps"}}
	if got, _ := json.Marshal(p.Waves); string(got) != mustJSON(wantWaves) {
		t.Errorf("waves %s, want %s", got, mustJSON(wantWaves))
	}
	var podinfo plan.Kustomization
	for _, ks := range p.Kustomizations {
		if ks.Name == "podinfo" {
			podinfo = ks
		}
	}
	if podinfo.Status != "not-rendered" || !strings.Contains(podinfo.Reason, "OCIRepository") {
		t.Errorf("a Kustomization of another source is %q (%q), want not-rendered naming its source", podinfo.Status, podinfo.Reason)
	}
	if p.Summary.Unchanged != 16 {
		t.Errorf("%d unchanged objects, want 16: %s", p.Summary.Unchanged, dump(p))
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name, kustomization, fragment string
		files                         map[string]string
	}{
		{"render failure at head is an error, not deletions", "apps", "render failed at head",
			map[string]string{"apps/db.yaml": "apiVersion: v1\nkind: [broken\n"}},
		{"path outside the source root names --source-root", "storage", "relative to --source-root",
			edit(t, "clusters/homelab/storage.yaml", "path: ./storage", "path: ./clusters/storage")},
		{"cycle", "storage", "dependency cycle",
			edit(t, "clusters/homelab/storage.yaml", "    - name: infrastructure\n", "    - name: apps\n")},
		{"missing dependency", "apps", "'flux-system/nope' not found",
			edit(t, "clusters/homelab/apps.yaml", "    - name: storage\n", "    - name: nope\n")},
	}
	r := newRepo(t, fixture())
	for i, tc := range cases {
		r.branch(branchName(i), tc.files)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := run(t, r, branchName(i), false)
			if !strings.Contains(strings.Join(p.Errors, "\n"), tc.fragment) || !strings.Contains(strings.Join(p.Errors, "\n"), tc.kustomization) {
				t.Fatalf("errors %q lack %q for %s", p.Errors, tc.fragment, tc.kustomization)
			}
			if p.ExitCode("never") != plan.ExitError {
				t.Errorf("exit code %d with errors, want %d", p.ExitCode("never"), plan.ExitError)
			}
			for _, ks := range p.Kustomizations {
				if ks.Name == tc.kustomization && (ks.Status != "error" || len(ks.Changes) > 0) {
					t.Errorf("%s failed but shows %s with changes %+v", ks.Name, ks.Status, ks.Changes)
				}
			}
		})
	}
}

// TestRenameKeepsObjects: renaming a Kustomization moves its objects; the
// plan shows no deletion (the engine adopts them, Flux #3316).
func TestRenameKeepsObjects(t *testing.T) {
	r := newRepo(t, fixture())
	files := edit(t, "clusters/homelab/apps.yaml", "name: apps\n", "name: applications\n")
	r.branch("rename", files)
	p := run(t, r, "rename", false)
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			if ch.Object.Kind != "Kustomization" && (ch.Action == plan.Deleted || ch.Action == plan.Created) {
				t.Errorf("rename %s %s: %s", ch.Action, ch.Object, dump(p))
			}
		}
	}
	ch, ok := findChange(p, "PersistentVolumeClaim/databases/db-data")
	if !ok || ch.MovedFrom != "flux-system/apps" {
		t.Errorf("db-data not shown as moved from apps: %+v", ch)
	}
}

func TestSecretsMasked(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("rotate", edit(t, "apps/db.yaml", "password: hunter2", "password: correct-horse"))
	p := run(t, r, "rotate", false)
	ch, ok := findChange(p, "Secret/databases/db-credentials")
	if !ok {
		t.Fatalf("secret change missing: %s", dump(p))
	}
	for _, leak := range []string{"hunter2", "correct-horse", "admin"} {
		if strings.Contains(ch.Diff, leak) {
			t.Errorf("diff shows a secret value %q:\n%s", leak, ch.Diff)
		}
	}
	for _, shown := range []string{"-  password: '*** (before)'", "+  password: '*** (after)'", "username: '***'"} {
		if !strings.Contains(ch.Diff, shown) {
			t.Errorf("diff lacks %q:\n%s", shown, ch.Diff)
		}
	}
}

func TestExitCodes(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("safe", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi"))
	r.branch("destructive", map[string]string{"storage/pv.yaml": ""})
	r.branch("recreate", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 1Gi"))
	for _, tc := range []struct {
		head, failOn string
		want         int
	}{
		{"main", "changes", plan.ExitNoChange},
		{"safe", "changes", plan.ExitChanges},
		{"safe", "destructive", plan.ExitNoChange},
		{"safe", "never", plan.ExitNoChange},
		{"recreate", "destructive", plan.ExitDestructive},
		{"recreate", "changes", plan.ExitChanges},
		// Blocked: the guard would keep the volume, but the change means to
		// delete it, and the gate must stop it for a reviewer to decide.
		{"destructive", "destructive", plan.ExitDestructive},
	} {
		if got := run(t, r, tc.head, false).ExitCode(tc.failOn); got != tc.want {
			t.Errorf("%s with --fail-on %s: exit %d, want %d", tc.head, tc.failOn, got, tc.want)
		}
	}
}

// TestChangedOnlySameChanges: rendering only what changed gives the same
// changes as rendering everything.
func TestChangedOnlySameChanges(t *testing.T) {
	r := newRepo(t, fixture())
	files := edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi")
	files["storage/pv.yaml"] = ""
	r.branch("mixed", files)
	full, changed := run(t, r, "mixed", false), run(t, r, "mixed", true)
	a, b := changesOf(full), changesOf(changed)
	if a != b {
		t.Errorf("changed-only plan differs:\nfull:\n%s\nchanged-only:\n%s", a, b)
	}
	for _, ks := range full.Kustomizations {
		if ks.Status == "skipped" {
			t.Errorf("a full plan skipped %s/%s", ks.Namespace, ks.Name)
		}
	}
	status := map[string]string{}
	for _, ks := range changed.Kustomizations {
		status[ks.Name] = ks.Status
	}
	// monitoring's files did not change; infrastructure's did not either,
	// but apps reads cluster-vars from it, so it must render.
	if status["monitoring"] != "skipped" || status["infrastructure"] != "unchanged" {
		t.Errorf("changed-only statuses %v, want monitoring skipped and infrastructure rendered", status)
	}
}

func changesOf(p *plan.Plan) string {
	var b strings.Builder
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			b.WriteString(ks.Name + " " + ch.Action + " " + ch.Object.String() + " " + ch.Risk + "\n")
		}
	}
	return b.String()
}

// TestGolden pins the three formats for one plan with every kind of change.
func TestGolden(t *testing.T) {
	r := newRepo(t, fixture())
	files := edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi")
	files["apps/db.yaml"] = strings.Replace(files["apps/db.yaml"], "password: hunter2", "password: s3cret", 1)
	files["storage/pv.yaml"] = ""
	files["infrastructure/lvmcluster.yaml"] = edit(t, "infrastructure/lvmcluster.yaml", "paths: [/dev/nvme0n1, /dev/nvme1n1]", "paths: [/dev/nvme0n1]")["infrastructure/lvmcluster.yaml"]
	files["apps/extra.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: databases\ndata:\n  k: v\n"
	r.branch("golden", files)
	p := run(t, r, "golden", false)
	var text, md, js bytes.Buffer
	if err := report.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteMarkdown(&md, p, 0); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"golden.txt": text.Bytes(), "golden.md": md.Bytes(), "golden.json": js.Bytes()} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./plan -run TestGolden -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the golden file; got:\n%s", name, got)
		}
	}
}

// TestMarkdownLimit: short of room, diffs are left out first, keeping
// every changed object with its risk; then whole Kustomizations are
// folded into a count.
func TestMarkdownLimit(t *testing.T) {
	r := newRepo(t, fixture())
	files := edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi")
	files["storage/pv.yaml"] = ""
	r.branch("two", files)
	p := run(t, r, "two", false)
	var full, lean, tiny bytes.Buffer
	_ = report.WriteMarkdown(&full, p, 0)
	diffs := 0
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			if ch.Action == plan.Changed && ch.Diff != "" {
				diffs += len(ch.Diff)
			}
		}
	}
	limit := full.Len() - diffs + 250 // room for everything but the diffs
	_ = report.WriteMarkdown(&lean, p, limit)
	if lean.Len() > limit || !strings.Contains(lean.String(), "Diffs left out") || strings.Contains(lean.String(), "… and ") {
		t.Errorf("at %d characters: %d written; want every Kustomization kept with its diffs left out:\n%s", limit, lean.Len(), lean.String())
	}
	for _, object := range []string{"PersistentVolumeClaim/databases/cache", "PersistentVolume/node-1-nvme1"} {
		if !strings.Contains(lean.String(), object) {
			t.Errorf("the lean comment lost %s:\n%s", object, lean.String())
		}
	}
	limit = strings.Index(full.String(), "### Changes") + 400
	_ = report.WriteMarkdown(&tiny, p, limit)
	var folded int
	if _, err := fmt.Sscanf(tiny.String()[strings.LastIndex(tiny.String(), "… and ")+len("… and "):], "%d more Kustomization(s)", &folded); err != nil {
		t.Fatalf("folded Kustomizations not counted (%v):\n%s", err, tiny.String())
	}
	if shown := strings.Count(tiny.String(), "<details>"); folded < 1 || folded+shown != 2 {
		t.Errorf("%d shown and %d folded, want 2 in all with at least one folded:\n%s", shown, folded, tiny.String())
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A btrfs StorageClass that points at another agent, or another tenant,
// cannot change in place: the plan says the class is recreated.
func TestBtrfsClassMoveIsARecreate(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "clusters", "homelab")
	files, err := testenv.ReadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	const class = "infrastructure/storage/btrfs-storageclass.yaml"
	r := newRepo(t, files)
	r.branch("new-agent", editIn(t, files, class, "https://storage-1.lan:8420", "https://storage-2.lan:8420"))
	r.branch("new-tenant", editIn(t, files, class, "provisioner-secret-name: btrfs-tenant", "provisioner-secret-name: other-tenant"))
	for _, head := range []string{"new-agent", "new-tenant"} {
		p, err := plan.Run(context.Background(), plan.Options{RepoDir: r.dir, Base: "main", Head: head, Path: "./cluster",
			SourceRoot: ".", Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}})
		if err != nil {
			t.Fatal(err)
		}
		ch, ok := findChange(p, "StorageClass.storage.k8s.io/strata-btrfs")
		if !ok || ch.Risk != risk.Recreate || !strings.Contains(strings.Join(ch.Reasons, " "), "parameters") {
			t.Fatalf("%s: StorageClass.storage.k8s.io/strata-btrfs = %+v (found %v), want a recreate naming parameters\n%s", head, ch, ok, dump(p))
		}
	}
}
