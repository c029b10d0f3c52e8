package plan_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/apply"
	"github.com/strata-gitops/strata/reconciler/build"
	"github.com/strata-gitops/strata/reconciler/graph"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// liveFixture is one Kustomization applying a namespace of ConfigMaps and
// a claim; the cluster is brought to its base revision by the engine's own
// apply code before each comparison.
func liveFixture(ns string) map[string]string {
	return map[string]string{
		"clusters/live/apps.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`,
		"apps/objects.yaml": fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  level: "1"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: edited
  namespace: %[1]s
data:
  mode: git
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: removed-by-hand
  namespace: %[1]s
data:
  k: v
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: %[1]s
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
`, ns),
	}
}

// TestLiveDrift: with a cluster, the plan reports what the cluster holds
// differently from the base revision, and what its inventory lists that
// Git no longer has; what matches the base revision is not drift.
func TestLiveDrift(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := fmt.Sprintf("live-%d", os.Getpid())
	r := newRepo(t, liveFixture(ns))
	r.branch("head", editIn(t, liveFixture(ns), "apps/objects.yaml", `level: "1"`, `level: "2"`))

	ks := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: "flux-system"},
		Spec: kustomizev1.KustomizationSpec{Path: "./apps", Prune: true, Interval: metav1.Duration{Duration: 600e9},
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"}},
	}
	applied := applyLikeTheEngine(t, env.Client, r.dir, ks)

	// Drift made by hand: one object edited, one deleted; two objects the
	// inventory still lists although Git dropped them long ago.
	patchData(t, env.Client, ns, "edited", map[string]any{"mode": "by-hand"})
	mustDelete(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "removed-by-hand", Namespace: ns}})
	leftovers := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "leftover", Namespace: ns}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "old-data", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
	}
	for _, o := range leftovers {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		gvk, _ := env.Client.GroupVersionKindFor(o)
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(o.GetName())
		applied = append(applied, u)
	}
	recordInventory(t, env.Client, ks, applied)

	p, err := plan.Run(ctx, plan.Options{RepoDir: r.dir, Base: "main", Head: "head", Path: "./clusters/live", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}, Live: env.Client, Engine: risk.Strata})
	if err != nil {
		t.Fatal(err)
	}
	var live *plan.Live
	for _, k := range p.Kustomizations {
		if k.Name == "apps" {
			live = k.Live
		}
	}
	if live == nil || live.Status != "compared" {
		t.Fatalf("apps not compared with the cluster: %+v\n%s", live, dump(p))
	}
	got := map[string]plan.Change{}
	for _, ch := range live.Drift {
		got[ch.Object.String()] = ch
	}
	for object, want := range map[string]struct{ action, risk, reason string }{
		"ConfigMap/" + ns + "/edited":               {plan.Changed, risk.Safe, "the cluster differs from the base revision"},
		"ConfigMap/" + ns + "/removed-by-hand":      {plan.Created, risk.Safe, "missing from the cluster"},
		"ConfigMap/" + ns + "/leftover":             {plan.Deleted, risk.Safe, "in neither revision"},
		"PersistentVolumeClaim/" + ns + "/old-data": {plan.Deleted, risk.Blocked, "data-loss guard keeps it"},
	} {
		ch, ok := got[object]
		if !ok {
			t.Errorf("no drift for %s: %s", object, dump(p))
			continue
		}
		if ch.Action != want.action || ch.Risk != want.risk || !strings.Contains(strings.Join(ch.Reasons, "\n"), want.reason) {
			t.Errorf("%s: %s %s %q, want %s %s with %q", object, ch.Action, ch.Risk, ch.Reasons, want.action, want.risk, want.reason)
		}
	}
	if ch := got["ConfigMap/"+ns+"/edited"]; !strings.Contains(ch.Diff, "-  mode: by-hand") || !strings.Contains(ch.Diff, "+  mode: git") {
		t.Errorf("edited ConfigMap's drift diff does not show the hand edit reverted:\n%s", ch.Diff)
	}
	if len(got) != 4 {
		t.Errorf("%d drifted objects, want 4 (settings changes in Git with the cluster at base; data is untouched): %s", len(got), dump(p))
	}
	if p.Summary.Drift != 4 || p.ExitCode("changes") != plan.ExitChanges {
		t.Errorf("summary drift %d, exit %d", p.Summary.Drift, p.ExitCode("changes"))
	}
}

// applyLikeTheEngine renders ks at the repository's work tree and applies
// it with the engine's preparation and field manager; it returns what was
// applied.
func applyLikeTheEngine(t *testing.T, c client.Client, dir string, ks *kustomizev1.Kustomization) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	rendered, err := build.Render(ctx, dir, ks, nil)
	if err != nil {
		t.Fatal(err)
	}
	objects := rendered.Objects
	m := apply.NewResourceManager(c, polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{}))
	if err := apply.PrepareObjects(ctx, m, c, c, ks, objects); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ApplyAllStaged(ctx, objects, ssa.DefaultApplyOptions()); err != nil {
		t.Fatal(err)
	}
	return objects
}

// recordInventory creates the Kustomization with the inventory the engine
// would have written for objects.
func recordInventory(t *testing.T, c client.Client, ks *kustomizev1.Kustomization, objects []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ks.Namespace}})
	ks = ks.DeepCopy()
	if err := c.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	inv := &kustomizev1.ResourceInventory{}
	for _, o := range objects {
		inv.Entries = append(inv.Entries, kustomizev1.ResourceRef{ID: object.UnstructuredToObjMetadata(o).String(), Version: o.GroupVersionKind().Version})
	}
	ks.Status.Inventory = inv
	ks.Status.LastAppliedRevision = "main@sha1:0000000000000000000000000000000000000000"
	if err := c.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
}

func patchData(t *testing.T, c client.Client, ns, name string, data map[string]any) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		cm.Data[k] = v.(string)
	}
	if err := c.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

func mustDelete(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Delete(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// TestSubstitutionsFromTheCluster: with --kubeconfig, a ConfigMap that
// substituteFrom names and the repository does not define is read from
// the cluster, and the Kustomization renders.
func TestSubstitutionsFromTheCluster(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	r := newRepo(t, fixture())
	r.commit("the vars move to the cluster", edit(t, "infrastructure/namespaces.yaml", "name: cluster-vars", "name: other-vars"))
	r.branch("bump", edit(t, "monitoring/dashboards.yaml", "dashboards", "dashboards-v2"))
	vars := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster-vars", Namespace: "flux-system"}, Data: map[string]string{"region": "eu-1"}}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, vars); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Run(ctx, plan.Options{RepoDir: r.dir, Base: "main", Head: "bump", Path: "./clusters/homelab", SourceRoot: ".",
		Source: graph.Key{Namespace: "flux-system", Name: "flux-system"}, Live: env.Client, Engine: risk.Strata})
	if err != nil {
		t.Fatal(err)
	}
	for _, ks := range p.Kustomizations {
		if ks.Name == "apps" && ks.Status == "not-rendered" {
			t.Fatalf("apps is not rendered though the cluster holds cluster-vars: %s", ks.Reason)
		}
	}
}
