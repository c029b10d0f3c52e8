package kustomization_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestApplyInventoryAndPrune(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/a.yaml": configMap("a"), "app/b.yaml": configMap("b")})
	s.source(rev)
	s.kustomization("app", "./app", nil)
	ks := s.waitReady("app", rev)
	if got := len(ks.Status.Inventory.Entries); got != 2 {
		t.Fatalf("inventory has %d entries, want 2: %+v", got, ks.Status.Inventory)
	}
	want := s.ns + "_a__ConfigMap"
	if ks.Status.Inventory.Entries[0].ID != want || ks.Status.Inventory.Entries[0].Version != "v1" {
		t.Errorf("inventory entry = %+v, want id %s v1", ks.Status.Inventory.Entries[0], want)
	}
	a := cm("a")
	if !s.exists(a) || a.Labels["kustomize.toolkit.fluxcd.io/name"] != "app" || a.Labels["kustomize.toolkit.fluxcd.io/namespace"] != s.ns {
		t.Fatalf("applied ConfigMap lacks Flux's owner labels: %v", a.Labels)
	}

	rev = s.push(map[string]string{"app/b.yaml": ""})
	s.refresh(rev)
	s.waitReady("app", rev)
	if s.exists(cm("b")) {
		t.Error("ConfigMap b was removed from Git but not pruned")
	}
	if !s.exists(cm("a")) {
		t.Error("ConfigMap a was pruned although it is still in Git")
	}
}

func TestPruneDisabledOrphans(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/a.yaml": configMap("a"), "app/b.yaml": configMap("b")})
	s.source(rev)
	s.kustomization("app", "./app", func(k *kustomizev1.Kustomization) { k.Spec.Prune = false })
	s.waitReady("app", rev)
	rev = s.push(map[string]string{"app/b.yaml": ""})
	s.refresh(rev)
	ks := s.waitReady("app", rev)
	if !s.exists(cm("b")) {
		t.Error("prune: false deleted ConfigMap b")
	}
	if len(ks.Status.Inventory.Entries) != 1 {
		t.Errorf("orphaned object still in inventory: %+v", ks.Status.Inventory)
	}
}

func TestPruneDisabledAnnotationKeepsObject(t *testing.T) {
	s := newStack(t)
	keep := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\n"
	s.applied("app", "./app", map[string]string{"app/keep.yaml": keep, "app/a.yaml": configMap("a")})
	rev := s.push(map[string]string{"app/keep.yaml": ""})
	s.refresh(rev)
	s.waitReady("app", rev)
	if !s.exists(cm("keep")) {
		t.Error("object annotated prune: disabled was pruned")
	}
}

func TestReconcileDisabledAnnotationSkipsApply(t *testing.T) {
	s := newStack(t)
	s.applied("app", "./app", map[string]string{"app/a.yaml": configMap("a", "key", "one")})
	disabled := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    kustomize.toolkit.fluxcd.io/reconcile: disabled\ndata:\n  key: two\n"
	rev := s.push(map[string]string{"app/a.yaml": disabled})
	s.refresh(rev)
	s.waitReady("app", rev)
	a := cm("a")
	s.exists(a)
	if a.Data["key"] != "one" {
		t.Errorf("object with reconcile: disabled was applied: %v", a.Data)
	}
}

// TestUnchangedObjectsAreNotDryRun: while no applied object moved since
// the last apply, a reconcile sends no dry-run; an object edited or deleted
// by hand moved and is put back, on a new revision as on a request.
func TestUnchangedObjectsAreNotDryRun(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"a/cm.yaml": configMap("a", "key", "one"), "b/cm.yaml": configMap("b", "key", "git")})
	s.source(rev)
	s.kustomization("a", "./a", nil)
	s.kustomization("b", "./b", nil)
	s.waitReady("a", rev)
	s.waitReady("b", rev)

	// The request itself and b's status are the only PATCHes; a dry-run
	// apply of b's ConfigMap would be a third.
	patches := patchRequests(t)
	s.waitHandled("b", s.request(s.get("b")))
	if n := patchRequests(t) - patches; n > 2 {
		t.Errorf("a reconcile with nothing changed sent %.0f PATCH requests, want 2 (the request and the status)", n)
	}

	b := cm("b")
	s.exists(b)
	b.Data["key"] = "hand-edited"
	if err := s.c.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	rev = s.push(map[string]string{"a/cm.yaml": configMap("a", "key", "two")})
	s.refresh(rev)
	s.waitReady("b", rev)
	testenv.Eventually(t, timeout, func() error {
		if s.exists(b); b.Data["key"] != "git" {
			return fmt.Errorf("hand edit not corrected on a new revision: %v", b.Data)
		}
		return nil
	})

	if err := s.c.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	s.request(s.get("b"))
	testenv.Eventually(t, timeout, func() error {
		if !s.exists(cm("b")) {
			return fmt.Errorf("ConfigMap deleted by hand not recreated on request")
		}
		return nil
	})
}

// TestASameArtifactIsNotRenderedAgain: a reconcile of the artifact the
// last apply was rendered from, with nothing moved in the cluster, makes
// no render at all, nor does a new revision that touches only another
// path; a new revision touching the path renders again.
func TestASameArtifactIsNotRenderedAgain(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"a/cm.yaml": configMap("a", "key", "one")})
	s.source(rev)
	s.kustomization("a", "./a", nil)
	s.waitReady("a", rev)

	before := rendered(t)
	s.waitHandled("a", s.request(s.get("a")))
	if n := rendered(t) - before; n != 0 {
		t.Errorf("a reconcile of the artifact already applied rendered %.0f times, want 0", n)
	}

	rev = s.push(map[string]string{"elsewhere/cm.yaml": configMap("b")})
	before = rendered(t)
	s.refresh(rev)
	s.waitReady("a", rev)
	if n := rendered(t) - before; n != 0 {
		t.Errorf("a new revision touching only another path rendered %.0f times, want 0", n)
	}

	rev = s.push(map[string]string{"a/cm.yaml": configMap("a", "key", "two")})
	before = rendered(t)
	s.refresh(rev)
	s.waitReady("a", rev)
	if n := rendered(t) - before; n == 0 {
		t.Error("a new revision changing the path was not rendered")
	}
	a := cm("a")
	if s.exists(a); a.Data["key"] != "two" {
		t.Fatalf("the new revision was not applied: %v", a.Data)
	}
}

// rendered is the renders this process's reconcilers made.
func rendered(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "strata_kustomization_renders_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("strata_kustomization_renders_total is not registered")
	return 0
}

// patchRequests counts the PATCH requests this process's clients sent,
// from client-go's request metric.
func patchRequests(t *testing.T) float64 {
	n := metricSum(t, "rest_client_requests_total", "method", "PATCH")
	if n == 0 {
		t.Fatal("no PATCH requests counted: is client-go's request metric registered?")
	}
	return n
}

// reconciles counts the Kustomization reconciles this process has finished
// (none before the first).
func reconciles(t *testing.T) float64 {
	return metricSum(t, "controller_runtime_reconcile_total", "controller", "kustomization")
}

// metricSum adds up the counters of family whose label has value.
func metricSum(t *testing.T, family, label, value string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestChangeInSharedBaseIsApplied changes files outside two
// Kustomizations' paths that their builds read: ../base from the
// kustomization.yaml at one's path, ../../base2 from a subdirectory of the
// other's, a path without a kustomization.yaml of its own (Flux's
// generator builds each such subdirectory). Both changes must be applied
// although nothing under either path changed.
func TestChangeInSharedBaseIsApplied(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{
		"base/cm.yaml":                       configMap("shared", "key", "one"),
		"base/kustomization.yaml":            "resources:\n- cm.yaml\n",
		"site/kustomization.yaml":            "resources:\n- ../base\n",
		"base2/cm.yaml":                      configMap("shared2", "key", "one"),
		"base2/kustomization.yaml":           "resources:\n- cm.yaml\n",
		"cluster/overlay/kustomization.yaml": "resources:\n- ../../base2\n",
		"unrelated/cm.yaml":                  configMap("other"),
		"unrelated/more/placeholder":         "x",
	})
	s.source(rev)
	s.kustomization("site", "./site", nil)
	s.kustomization("cluster", "./cluster", nil)
	s.waitReady("site", rev)
	s.waitReady("cluster", rev)
	rev = s.push(map[string]string{
		"base/cm.yaml":  configMap("shared", "key", "two"),
		"base2/cm.yaml": configMap("shared2", "key", "two"),
	})
	s.refresh(rev)
	s.waitReady("site", rev)
	s.waitReady("cluster", rev)
	for _, name := range []string{"shared", "shared2"} {
		if live := cm(name); !s.exists(live) || live.Data["key"] != "two" {
			t.Errorf("change in the base of %s was not applied: %v", name, live.Data)
		}
	}
}

// neverReadyDeployment waits forever with wait: true: no kubelet runs it.
const neverReadyDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx
`

// TestLongApplyShowsProgress: an apply that takes longer than a moment
// (here: waiting for a Deployment no kubelet will run) is shown as
// Reconciling with the revision while it runs, as Flux shows it.
func TestLongApplyShowsProgress(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/web.yaml": neverReadyDeployment})
	s.source(rev)
	s.kustomization("app", "./app", func(k *kustomizev1.Kustomization) { k.Spec.Wait = true })
	s.waitCondition("app", meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingReason, "Applying revision "+rev)
}

// TestDependentWaitsQuietlyForAFirstApply: a Kustomization created with
// its dependency, while the dependency is still in its first apply, keeps
// an empty status (kstatus: in progress) rather than writing
// DependencyNotReady. The dependent is reconciled at creation, long before
// the dependency's apply has run for the second that makes it say so.
func TestDependentWaitsQuietlyForAFirstApply(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"base/web.yaml": neverReadyDeployment, "app/a.yaml": configMap("a")})
	s.source(rev)
	s.kustomization("base", "./base", func(k *kustomizev1.Kustomization) { k.Spec.Wait = true })
	s.kustomization("app", "./app", dependsOn("base"))
	s.waitCondition("base", meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingReason, "Applying revision "+rev)
	if app := s.get("app"); len(app.Status.Conditions) != 0 || app.Status.ObservedGeneration == app.Generation {
		t.Errorf("the dependent wrote a status while its dependency is in its first apply: %+v", app.Status)
	}
}

// TestKustomizationWaitsQuietlyForItsSourcesFirstFetch: a Kustomization
// created with its GitRepository keeps an empty status while the first
// fetch runs, rather than writing ArtifactFailed, and hears at once (not at
// its 30-second retry) when the fetch fails.
func TestKustomizationWaitsQuietlyForItsSourcesFirstFetch(t *testing.T) {
	s := newStack(t)
	release, fetched := make(chan struct{}), make(chan struct{}, 1)
	git := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case fetched <- struct{}{}:
		default:
		}
		<-release
		http.Error(w, "git server unavailable", http.StatusServiceUnavailable)
	}))
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }); git.Close() })
	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "flux-system", Namespace: s.ns, Labels: s.labels()},
		Spec:       sourcev1.GitRepositorySpec{URL: git.URL + "/cluster.git", Interval: metav1.Duration{Duration: time.Hour}},
	}
	if err := s.c.Create(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fetched:
	case <-time.After(timeout):
		t.Fatal("the GitRepository's first fetch did not start")
	}

	before := reconciles(t)
	s.kustomization("app", "./app", nil)
	testenv.Eventually(t, timeout, func() error {
		if reconciles(t) == before {
			return fmt.Errorf("app not reconciled yet")
		}
		return nil
	})
	if app := s.get("app"); len(app.Status.Conditions) != 0 || app.Status.ObservedGeneration == app.Generation {
		t.Errorf("app wrote a status while its source's first fetch runs: %+v", app.Status)
	}

	once.Do(func() { close(release) })
	testenv.Eventually(t, 10*time.Second, func() error {
		c := apimeta.FindStatusCondition(s.get("app").Status.Conditions, meta.ReadyCondition)
		if c == nil || c.Reason != meta.ArtifactFailedReason {
			return fmt.Errorf("app: want Ready=False/ArtifactFailed once the fetch failed, have %+v", c)
		}
		return nil
	})
}

// A dependent waiting quietly hears at once when its dependency's first
// result is a failure, not at its 30-second retry (a dependency cycle
// created member by member waited that way).
func TestQuietWaitEndsWithTheDependencysFirstResult(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/a.yaml": configMap("a")})
	s.source(rev)
	s.kustomization("base", "./missing", func(k *kustomizev1.Kustomization) { k.Spec.Suspend = true })
	s.kustomization("app", "./app", dependsOn("base"))
	// The finalizer is added before the dependency check: app is waiting.
	testenv.Eventually(t, timeout, func() error {
		if !controllerutil.ContainsFinalizer(s.get("app"), kustomization.Finalizer) {
			return fmt.Errorf("app not reconciled yet")
		}
		return nil
	})
	testenv.Update(t, s.c, s.get("base"), func(k *kustomizev1.Kustomization) { k.Spec.Suspend = false })
	testenv.Eventually(t, 10*time.Second, func() error {
		c := apimeta.FindStatusCondition(s.get("app").Status.Conditions, meta.ReadyCondition)
		if c == nil || c.Reason != meta.DependencyNotReadyReason {
			return fmt.Errorf("app: want Ready=False/DependencyNotReady once base failed, have %+v", c)
		}
		return nil
	})
}
