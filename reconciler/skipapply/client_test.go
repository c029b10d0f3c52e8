package skipapply

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/apply"
)

// countingClient counts the reads and dry-runs that reach the server.
type countingClient struct {
	client.Client
	gets, dryRuns atomic.Int32
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if isDryRun(opts) {
		c.dryRuns.Add(1)
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

var probes atomic.Int32

type probeFixture struct {
	t       *testing.T
	c       client.Client
	ns      string
	counter *countingClient
	probe   *Client
	manager *ssa.ResourceManager
}

func newProbeFixture(t *testing.T) *probeFixture {
	env := testenv.Get(t)
	f := &probeFixture{t: t, c: env.Client, ns: fmt.Sprintf("probe-%d-%d", os.Getpid(), probes.Add(1))}
	if err := f.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	f.counter = &countingClient{Client: env.Client}
	f.probe = NewClient(f.counter)
	f.manager = apply.NewResourceManager(f.probe, polling.NewStatusPoller(f.probe, f.probe.RESTMapper(), polling.Options{}))
	return f
}

func (f *probeFixture) configMap(name, value string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": f.ns},
		"data":     map[string]any{"key": value},
	}}
	u.SetAnnotations(annotations)
	return u
}

// apply applies objects as the engine does, after an apply that left inv.
func (f *probeFixture) apply(inv *ssa.ChangeSet, objects ...*unstructured.Unstructured) *ssa.ChangeSet {
	f.t.Helper()
	last := apply.Inventory(ssa.NewChangeSet())
	if inv != nil {
		last = apply.Inventory(inv)
	}
	f.counter.gets.Store(0)
	f.counter.dryRuns.Store(0)
	opts := apply.Options(&kustomizev1.Kustomization{})
	f.probe.Expect(objects, last, opts.ExclusionSelector)
	defer f.probe.Done()
	cs, err := f.manager.ApplyAllStaged(context.Background(), objects, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

func (f *probeFixture) live(name string) string {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, cm); err != nil {
		f.t.Fatal(err)
	}
	return cm.Data["key"]
}

func actions(cs *ssa.ChangeSet) map[string]ssa.Action {
	m := map[string]ssa.Action{}
	for _, e := range cs.Entries {
		m[e.ObjMetadata.Name] = e.Action
	}
	return m
}

// TestFirstApplyReadsNoNewObject: objects a Kustomization never applied
// are created with one dry-run and one apply each, no read; once in the
// inventory they are read again before they are changed.
func TestFirstApplyReadsNoNewObject(t *testing.T) {
	f := newProbeFixture(t)
	cs := f.apply(nil, f.configMap("a", "one", nil), f.configMap("b", "one", nil))
	if got := actions(cs); got["a"] != ssa.CreatedAction || got["b"] != ssa.CreatedAction {
		t.Errorf("first apply: %v, want both created", got)
	}
	if n := f.counter.gets.Load(); n != 0 {
		t.Errorf("first apply read %d objects from the server, want none", n)
	}
	if n := f.counter.dryRuns.Load(); n != 2 {
		t.Errorf("first apply sent %d dry-runs, want 2 (one per object)", n)
	}
	if f.live("a") != "one" || f.live("b") != "one" {
		t.Error("objects not created")
	}

	cs = f.apply(cs, f.configMap("a", "two", nil), f.configMap("b", "one", nil))
	if got := actions(cs); got["a"] != ssa.ConfiguredAction || got["b"] != ssa.UnchangedAction {
		t.Errorf("second apply: %v, want a configured, b unchanged", got)
	}
	if n := f.counter.gets.Load(); n != 2 {
		t.Errorf("second apply read %d objects, want 2: applied objects are read as ssa reads them", n)
	}
	if f.live("a") != "two" {
		t.Error("change not applied")
	}
}

// TestProbeLeavesExistingObjectsToSSA: an object that exists without being
// in the inventory (made by hand, or by another Kustomization) is read as
// ssa reads it, so its annotations still count; an object excluded from
// the apply is not dry-run.
func TestProbeLeavesExistingObjectsToSSA(t *testing.T) {
	f := newProbeFixture(t)
	for _, name := range []string{"kept", "adopted"} {
		if err := f.c.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
			Data:       map[string]string{"key": "by hand"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	ifNotPresent := map[string]string{kustomizev1.GroupVersion.Group + "/ssa": kustomizev1.IfNotPresentValue}
	disabled := map[string]string{kustomizev1.GroupVersion.Group + "/reconcile": kustomizev1.DisabledValue}
	cs := f.apply(nil, f.configMap("kept", "git", ifNotPresent), f.configMap("adopted", "git", nil), f.configMap("disabled", "git", disabled))
	if got := actions(cs); got["kept"] != ssa.SkippedAction || got["adopted"] != ssa.ConfiguredAction || got["disabled"] != ssa.SkippedAction {
		t.Errorf("apply over existing objects: %v, want kept and disabled skipped, adopted configured", got)
	}
	// The probe's dry-runs of kept and adopted, and ssa's of adopted.
	if n := f.counter.dryRuns.Load(); n != 3 {
		t.Errorf("%d dry-runs, want 3: none for an object excluded from the apply", n)
	}
	if v := f.live("kept"); v != "by hand" {
		t.Errorf("object marked IfNotPresent was overwritten: %q", v)
	}
	if v := f.live("adopted"); v != "git" {
		t.Errorf("existing object not applied: %q", v)
	}
}

// TestProbeAnswersOnlyTheSameDryRun: ssa's dry-run is answered from the
// probe only when it sends what the probe sent.
func TestProbeAnswersOnlyTheSameDryRun(t *testing.T) {
	f := newProbeFixture(t)
	desired := f.configMap("c", "one", nil)
	f.probe.Expect([]*unstructured.Unstructured{desired}, nil, nil)
	defer f.probe.Done()
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(desired.GroupVersionKind())
	if err := f.probe.Get(context.Background(), client.ObjectKeyFromObject(desired), existing); err == nil {
		t.Fatal("probe found an object that does not exist")
	}
	changed := f.configMap("c", "two", nil)
	//nolint:staticcheck // ssa's dry-run
	if err := f.probe.Patch(context.Background(), changed, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner(apply.FieldManager)); err != nil {
		t.Fatal(err)
	}
	if n := f.counter.dryRuns.Load(); n != 2 {
		t.Errorf("%d dry-runs reached the server, want 2: a changed object must be dry-run again", n)
	}
	if v, _, _ := unstructured.NestedString(changed.Object, "data", "key"); v != "two" {
		t.Errorf("dry-run answered with another object's result: %q", v)
	}
}
