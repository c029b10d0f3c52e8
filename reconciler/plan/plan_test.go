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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/graph"
	"github.com/strata-gitops/strata/reconciler/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func run(t *testing.T, r *repo, head string, changedOnly bool) *plan.Plan {
	t.Helper()
	p, err := plan.Run(context.Background(), plan.Options{
		RepoDir: r.dir, Base: "main", Head: head, Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}, ChangedOnly: changedOnly,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// want is one expected change; reason is a fragment of one of its reasons.
type want struct {
	object, action, risk, reason string
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
			[]want{{"PersistentVolumeClaim/databases/cache", plan.Changed, plan.Safe, "allows expansion"}}},
		{"claim grows where the class does not expand", edit(t, "clusters/homelab/apps.yaml", "db_size: 20Gi", "db_size: 30Gi"),
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, plan.Recreate, "does not allow expansion"},
				{"Kustomization.kustomize.toolkit.fluxcd.io/flux-system/apps", plan.Changed, plan.Safe, ""}}},
		{"claim shrinks", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 1Gi"),
			[]want{{"PersistentVolumeClaim/databases/cache", plan.Changed, plan.Recreate, "refuses to shrink"}}},
		{"immutable claim field without force", pvcForceClass,
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, plan.Recreate, "the apply will fail"}}},
		{"immutable claim field with force is blocked", pvcForce,
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, plan.Blocked, "PersistentVolumeClaim holds data"}}},
		{"immutable claim field with force and opt-in destroys data", optedIn,
			[]want{{"PersistentVolumeClaim/databases/db-data", plan.Changed, plan.DestroysData, "carries strata.dev/allow-data-loss"}}},
		{"pruned volume is blocked", map[string]string{"storage/pv.yaml": ""},
			[]want{{"PersistentVolume/node-1-nvme1", plan.Deleted, plan.Blocked, "PersistentVolume holds data"}}},
		{"pruned volume with opt-in destroys data", storageOptIn,
			[]want{{"PersistentVolume/node-1-nvme1", plan.Deleted, plan.DestroysData, "holds data"}}},
		{"reclaim policy Delete on a bound volume", edit(t, "storage/pv.yaml", "Retain", "Delete"),
			[]want{{"PersistentVolume/node-1-nvme1", plan.Changed, plan.DestroysData, "while the volume is bound"}}},
		{"volume node affinity", edit(t, "storage/pv.yaml", "values: [node-1]", "values: [node-2]"),
			[]want{{"PersistentVolume/node-1-nvme1", plan.Changed, plan.Disruptive, "node affinity"}}},
		{"volume source", edit(t, "storage/pv.yaml", "/mnt/disks/nvme1", "/mnt/disks/nvme2"),
			[]want{{"PersistentVolume/node-1-nvme1", plan.Changed, plan.Recreate, "spec.local"}}},
		{"workload claims", edit(t, "apps/db.yaml", "claimName: db-data", "claimName: cache"),
			[]want{{"Deployment.apps/databases/db", plan.Changed, plan.Disruptive, "volume claims change"}}},
		{"device leaves a volume group", edit(t, "infrastructure/lvmcluster.yaml", "paths: [/dev/nvme0n1, /dev/nvme1n1]", "paths: [/dev/nvme0n1]"),
			[]want{{"LVMCluster.storage.strata.dev/local", plan.Changed, plan.DestroysData, "device /dev/nvme1n1 leaves"}}},
		{"wipe turned on", edit(t, "infrastructure/lvmcluster.yaml", "        deviceSelector:\n", "        deviceSelector:\n          forceWipeDevicesAndDestroyAllData: true\n"),
			[]want{{"LVMCluster.storage.strata.dev/local", plan.Changed, plan.DestroysData, "forceWipeDevicesAndDestroyAllData"}}},
		{"storage class parameters", edit(t, "storage/storageclass.yaml", "deviceClass: nvme", "deviceClass: ssd"),
			[]want{{"StorageClass.storage.k8s.io/thin", plan.Changed, plan.Recreate, "parameters cannot change"}}},
		{"namespace holding claims is blocked", edit(t, "infrastructure/namespaces.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: databases\n---\n", ""),
			[]want{{"Namespace/databases", plan.Deleted, plan.Blocked, "still contains PersistentVolumeClaims"}}},
		{"commonMetadata reaches every object", edit(t, "clusters/homelab/monitoring.yaml", "  path: ./monitoring\n", "  path: ./monitoring\n  commonMetadata:\n    labels:\n      team: storage\n"),
			[]want{{"ConfigMap/flux-system/dashboards", plan.Changed, plan.Safe, ""},
				{"Kustomization.kustomize.toolkit.fluxcd.io/flux-system/monitoring", plan.Changed, plan.Safe, ""}}},
		{"not pruned is orphaned", func() map[string]string {
			f := edit(t, "clusters/homelab/storage.yaml", "prune: true", "prune: false")
			f["storage/pv.yaml"] = ""
			return f
		}(), []want{{"PersistentVolume/node-1-nvme1", plan.Orphaned, plan.Safe, "not pruned"}}},
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
			for _, w := range tc.want {
				ch, ok := findChange(p, w.object)
				if !ok {
					t.Fatalf("no change of %s in %s", w.object, dump(p))
				}
				if ch.Action != w.action || ch.Risk != w.risk || !strings.Contains(strings.Join(ch.Reasons, "\n"), w.reason) {
					t.Errorf("%s: %s %s %q, want %s %s with %q", w.object, ch.Action, ch.Risk, ch.Reasons, w.action, w.risk, w.reason)
				}
				if ch.Risk == plan.Blocked && ch.OptIn != `strata.dev/allow-data-loss: "true"` {
					t.Errorf("%s is blocked without naming the opt-in: %q", w.object, ch.OptIn)
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
	_ = plan.WriteText(&b, p, false)
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
	if err := plan.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if err := plan.WriteMarkdown(&md, p, 0); err != nil {
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
			t.Fatalf("%v (run go test ./reconciler/plan -run TestGolden -update)", err)
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
	_ = plan.WriteMarkdown(&full, p, 0)
	diffs := 0
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			if ch.Action == plan.Changed && ch.Diff != "" {
				diffs += len(ch.Diff)
			}
		}
	}
	limit := full.Len() - diffs + 250 // room for everything but the diffs
	_ = plan.WriteMarkdown(&lean, p, limit)
	if lean.Len() > limit || !strings.Contains(lean.String(), "Diffs left out") || strings.Contains(lean.String(), "… and ") {
		t.Errorf("at %d characters: %d written; want every Kustomization kept with its diffs left out:\n%s", limit, lean.Len(), lean.String())
	}
	for _, object := range []string{"PersistentVolumeClaim/databases/cache", "PersistentVolume/node-1-nvme1"} {
		if !strings.Contains(lean.String(), object) {
			t.Errorf("the lean comment lost %s:\n%s", object, lean.String())
		}
	}
	limit = strings.Index(full.String(), "### Changes") + 400
	_ = plan.WriteMarkdown(&tiny, p, limit)
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

// TestExampleRepository plans the example repository the README points
// to, laid out as its GitRepository serves it: everything renders.
func TestExampleRepository(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "clusters", "homelab")
	files, err := testenv.ReadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t, files)
	p, err := plan.Run(context.Background(), plan.Options{RepoDir: r.dir, Base: "main", Head: "main", Path: "./cluster",
		SourceRoot: ".", Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) > 0 || len(p.Kustomizations) < 3 {
		t.Fatalf("the example repository does not plan cleanly: %s", dump(p))
	}
	for _, ks := range p.Kustomizations {
		if ks.Status != "unchanged" {
			t.Errorf("%s/%s: %s %s", ks.Namespace, ks.Name, ks.Status, ks.Reason)
		}
	}
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
	r.branch("new-agent", editIn(t, files, class, "http://storage-1.lan:8420", "http://storage-2.lan:8420"))
	r.branch("new-tenant", editIn(t, files, class, "provisioner-secret-name: btrfs-tenant", "provisioner-secret-name: other-tenant"))
	for _, head := range []string{"new-agent", "new-tenant"} {
		p, err := plan.Run(context.Background(), plan.Options{RepoDir: r.dir, Base: "main", Head: head, Path: "./cluster",
			SourceRoot: ".", Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}})
		if err != nil {
			t.Fatal(err)
		}
		ch, ok := findChange(p, "StorageClass.storage.k8s.io/strata-btrfs")
		if !ok || ch.Risk != plan.Recreate || !strings.Contains(strings.Join(ch.Reasons, " "), "parameters") {
			t.Fatalf("%s: StorageClass.storage.k8s.io/strata-btrfs = %+v (found %v), want a recreate naming parameters\n%s", head, ch, ok, dump(p))
		}
	}
}

// TestChangedOnlySkipsPathsWithSchemaComments: most public repositories
// begin their kustomization files with a yaml-language-server schema
// comment; its URL is no remote base, so an untouched path is skipped.
func TestChangedOnlySkipsPathsWithSchemaComments(t *testing.T) {
	files := fixture()
	files["monitoring/kustomization.yaml"] = "# yaml-language-server: $schema=https://json.schemastore.org/kustomization\n" +
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- dashboards.yaml\n"
	r := newRepo(t, files)
	r.branch("bump", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi"))
	status := map[string]string{}
	for _, ks := range run(t, r, "bump", true).Kustomizations {
		status[ks.Name] = ks.Status
	}
	if status["monitoring"] != "skipped" {
		t.Fatalf("monitoring, untouched and with a schema comment, is %q in a changed-only plan (all: %v); want skipped", status["monitoring"], status)
	}
}

// TestASourceThatMatchesNothingIsAnError: a --source that no Kustomization
// under the path is built from would render nothing and pass as "no
// change"; it is an error that names the sources in use.
func TestASourceThatMatchesNothingIsAnError(t *testing.T) {
	r := newRepo(t, fixture())
	_, err := plan.Run(context.Background(), plan.Options{
		RepoDir: r.dir, Base: "main", Head: "main", Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "not-this-repository"},
	})
	if err == nil || !strings.Contains(err.Error(), "--source flux-system/not-this-repository") {
		t.Fatalf("plan with a source nothing uses = %v, want an error naming --source", err)
	}
}

// TestWorktreeWithARelativeOrInnerRepo: --repo may be "." or any directory
// inside the clone; the working tree is still read from the clone's top.
func TestWorktreeWithARelativeOrInnerRepo(t *testing.T) {
	r := newRepo(t, fixture())
	for name, content := range edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi") {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(r.dir)
	for _, repoDir := range []string{".", "apps"} {
		p, err := plan.Run(context.Background(), plan.Options{
			RepoDir: repoDir, Base: "main", Head: plan.WorkTree, Path: "./clusters/homelab", SourceRoot: ".",
			Source: graph.Key{Namespace: "flux-system", Name: "flux-system"},
		})
		if err != nil {
			t.Fatalf("--repo %s: %v", repoDir, err)
		}
		if len(p.Errors) > 0 || p.Summary.Deleted > 0 || p.Summary.Changed != 1 {
			t.Fatalf("--repo %s: errors %v, %d deleted, %d changed; want the one uncommitted change", repoDir, p.Errors, p.Summary.Deleted, p.Summary.Changed)
		}
	}
}

// TestABrokenParentDeletesNothing: a YAML error in one ks.yaml makes the
// Kustomization that holds it fail to render; the Kustomizations it
// declared are then unknown on the head side, not removed, and nothing of
// theirs is deleted.
func TestABrokenParentDeletesNothing(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("broken", map[string]string{"clusters/homelab/monitoring.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: [unclosed\n"})
	p := run(t, r, "broken", false)
	if len(p.Errors) == 0 {
		t.Fatal("a plan over a broken ks.yaml reports no error")
	}
	if p.Summary.Deleted != 0 {
		t.Fatalf("a broken parent reads as %d deletions", p.Summary.Deleted)
	}
	// Paths are the repository's, not the checkout's temporary directory,
	// so the PR comment is the same on every run.
	for _, e := range p.Errors {
		if strings.Contains(e, "strata-plan-") || strings.Contains(e, os.TempDir()) {
			t.Errorf("error names the checkout's temporary directory: %s", e)
		}
	}
	unknown := 0
	for _, ks := range p.Kustomizations {
		if ks.Status == "removed" {
			t.Errorf("Kustomization %s/%s is removed below a parent that failed to render", ks.Namespace, ks.Name)
		}
		if ks.Status == "unknown" {
			unknown++
		}
	}
	if unknown == 0 {
		t.Fatalf("no Kustomization is reported unknown: %+v", p.Kustomizations)
	}
	// In the comment the broken Kustomization is an error, not a change.
	var md bytes.Buffer
	if err := plan.WriteMarkdown(&md, p, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "failed\n") || strings.Contains(md.String(), " changed\n```") {
		t.Errorf("the graph shows the broken Kustomization as changed:\n%s", md.String())
	}
}

// TestASubstitutionFromTheClusterIsNotRendered: a substituteFrom of a
// ConfigMap the repository does not define (one made at bootstrap) leaves
// that Kustomization not rendered, on both sides, with a warning; the rest
// of the plan stands and sets the exit code. --substitute-from supplies
// the object and the Kustomization renders.
func TestASubstitutionFromTheClusterIsNotRendered(t *testing.T) {
	r := newRepo(t, fixture())
	files := edit(t, "infrastructure/namespaces.yaml", "name: cluster-vars", "name: other-vars")
	r.commit("the vars move to the cluster", files)
	r.branch("bump", edit(t, "monitoring/dashboards.yaml", "dashboards", "dashboards-v2"))
	p := run(t, r, "bump", false)
	status := map[string]plan.Kustomization{}
	for _, ks := range p.Kustomizations {
		status[ks.Name] = ks
	}
	if apps := status["apps"]; apps.Status != "not-rendered" || !strings.Contains(apps.Reason, "--substitute-from") {
		t.Fatalf("apps is %q (%q), want not-rendered saying how to supply the object", apps.Status, apps.Reason)
	}
	if len(p.Errors) > 0 || !strings.Contains(strings.Join(p.Warnings, "\n"), "cluster-vars") {
		t.Fatalf("errors %q, warnings %q; want no error and a warning naming cluster-vars", p.Errors, p.Warnings)
	}
	if code := p.ExitCode("changes"); code != plan.ExitChanges {
		t.Fatalf("exit %d, want %d from the rest of the plan", code, plan.ExitChanges)
	}
	vars := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cluster-vars", "namespace": "flux-system"}, "data": map[string]any{"region": "eu-1"}}}
	p, err := plan.Run(context.Background(), plan.Options{
		RepoDir: r.dir, Base: "main", Head: "bump", Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}, SubstituteFrom: []*unstructured.Unstructured{vars},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ks := range p.Kustomizations {
		if ks.Name == "apps" && ks.Status == "not-rendered" {
			t.Fatalf("apps is still not rendered with --substitute-from: %s", ks.Reason)
		}
	}
}

// TestStorageAwareness: changes that lose data later or move an app off
// its data, and removals that stop replication, get a class a reviewer
// cannot miss.
func TestStorageAwareness(t *testing.T) {
	files := fixture()
	files["apps/stateful.yaml"] = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
  namespace: databases
spec:
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
      volumes:
        - name: data
          persistentVolumeClaim: {claimName: web-data}
`
	files["apps/release.yaml"] = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: gitea
  namespace: databases
spec:
  interval: 1h
  chart: {spec: {chart: gitea, sourceRef: {kind: HelmRepository, name: gitea}}}
  values:
    persistence: {enabled: true, existingClaim: gitea-data}
`
	files["apps/backup.yaml"] = `apiVersion: volsync.backube/v1alpha1
kind: ReplicationSource
metadata:
  name: db-backup
  namespace: databases
spec:
  sourcePVC: db-data
`
	r := newRepo(t, files)
	retention := editIn(t, files, "apps/stateful.yaml", "  serviceName: web\n", "  serviceName: web\n  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}\n")
	templates := editIn(t, files, "apps/stateful.yaml", "      volumes:\n        - name: data\n          persistentVolumeClaim: {claimName: web-data}\n",
		"  volumeClaimTemplates:\n    - metadata: {name: data}\n      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n")
	r.branch("retention", retention)
	r.branch("templates", templates)
	r.branch("chart", editIn(t, files, "apps/release.yaml", "existingClaim: gitea-data", "existingClaim: gitea-data-new"))
	r.branch("backup", map[string]string{"apps/backup.yaml": ""})
	for _, tc := range []struct {
		head, object, risk, reason string
	}{
		{"retention", "StatefulSet.apps/databases/web", plan.DestroysData, "whenDeleted becomes Delete"},
		{"templates", "StatefulSet.apps/databases/web", plan.Disruptive, "new, empty volumes"},
		{"chart", "HelmRelease.helm.toolkit.fluxcd.io/databases/gitea", plan.Disruptive, "existing claims change"},
		{"backup", "ReplicationSource.volsync.backube/databases/db-backup", plan.Disruptive, "stops the replication or backups"},
	} {
		ch, ok := findChange(run(t, r, tc.head, false), tc.object)
		if !ok || ch.Risk != tc.risk || !strings.Contains(strings.Join(ch.Reasons, "; "), tc.reason) {
			t.Errorf("%s: %s is %+v, want %s saying %q", tc.head, tc.object, ch, tc.risk, tc.reason)
		}
	}
}

// TestKindsOfOneNameInTwoGroupsAreToldApart: rows name the API group, so
// two changed Certificates of different operators read as two objects.
func TestKindsOfOneNameInTwoGroupsAreToldApart(t *testing.T) {
	files := fixture()
	cert := func(apiVersion, host string) string {
		return "apiVersion: " + apiVersion + "\nkind: Certificate\nmetadata:\n  name: web\n  namespace: databases\nspec:\n  host: " + host + "\n"
	}
	files["apps/cert-a.yaml"] = cert("cert-manager.io/v1", "a.example")
	files["apps/cert-b.yaml"] = cert("certs.example.com/v1", "a.example")
	r := newRepo(t, files)
	r.branch("hosts", map[string]string{"apps/cert-a.yaml": cert("cert-manager.io/v1", "b.example"), "apps/cert-b.yaml": cert("certs.example.com/v1", "b.example")})
	p := run(t, r, "hosts", false)
	var text bytes.Buffer
	if err := plan.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	for _, object := range []string{"Certificate.cert-manager.io/databases/web", "Certificate.certs.example.com/databases/web"} {
		if _, ok := findChange(p, object); !ok || !strings.Contains(text.String(), object) {
			t.Errorf("%s not a change of its own (found %v):\n%s", object, ok, text.String())
		}
	}
}

// TestChangedOnlyFollowsASharedComponent: a Kustomization whose build
// uses a component outside its path is skipped while nothing it reads
// changed, and rendered (with the same changes as a full plan) when the
// shared component changes.
func TestChangedOnlyFollowsASharedComponent(t *testing.T) {
	files := fixture()
	files["monitoring/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- dashboards.yaml\ncomponents:\n- ../components/common\n"
	component := func(level string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: common\n  namespace: flux-system\ndata:\n  level: \"" + level + "\"\n"
	}
	files["components/common/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n- common.yaml\n"
	files["components/common/common.yaml"] = component("1")
	r := newRepo(t, files)
	r.branch("bump", edit(t, "apps/db.yaml", "storage: 5Gi", "storage: 8Gi"))
	r.branch("shared", map[string]string{"components/common/common.yaml": component("2")})
	statusOf := func(p *plan.Plan) map[string]string {
		status := map[string]string{}
		for _, ks := range p.Kustomizations {
			status[ks.Name] = ks.Status
		}
		return status
	}
	if s := statusOf(run(t, r, "bump", true)); s["monitoring"] != "skipped" {
		t.Errorf("monitoring, whose files and component are untouched, is %q in a changed-only plan (all: %v); want skipped", s["monitoring"], s)
	}
	changedOnly := run(t, r, "shared", true)
	if s := statusOf(changedOnly); s["monitoring"] == "skipped" {
		t.Errorf("monitoring was skipped though its shared component changed")
	}
	if got, want := changesOf(changedOnly), changesOf(run(t, r, "shared", false)); got != want || !strings.Contains(got, "ConfigMap/flux-system/common") {
		t.Errorf("changed-only changes:\n%s\nfull plan:\n%s\nwant the same, with ConfigMap common changed", got, want)
	}
}
