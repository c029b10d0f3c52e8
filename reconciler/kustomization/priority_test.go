package kustomization

import (
	"context"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// A requeue must not keep the urgent priority the item was taken at: the
// periodic requeue of every Kustomization a first revision touched would
// then outrank the next push's urgent ones for good (measured: the
// changed app was reconciled after all 99 of its dependency's siblings).
func TestRequeueIsRoutinePriority(t *testing.T) {
	r := &Reconciler{Client: testenv.Get(t).Client}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Priority == nil || *res.Priority != routinePriority {
		t.Fatalf("requeue priority = %v, want %d", res.Priority, routinePriority)
	}
}

// Once a dependency records a new revision, only its dependents that still
// have work wait no longer: one the revision touched, or one not Ready
// (it may have waited for exactly this dependency). A Ready one the
// revision left alone keeps its deferral, so it does not compete with the
// dependent the push changed.
func TestOnlyDependentsWithWorkStartAtOnce(t *testing.T) {
	ready := func(generation int64) *kustomizev1.Kustomization {
		ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		ks.Status.LastAppliedRevision = "main@sha1:1"
		ks.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
		return ks
	}
	for _, c := range []struct {
		name    string
		ks      *kustomizev1.Kustomization
		touched bool
		want    time.Duration
	}{
		{"ready and untouched", ready(1), false, deferred},
		{"ready and touched", ready(1), true, 0},
		{"its spec changed since it was ready", ready(2), false, 0},
		{"never applied", &kustomizev1.Kustomization{}, false, 0},
	} {
		if got := dependentDelay(c.ks, c.touched); got != c.want {
			t.Errorf("%s: waits %v, want %v", c.name, got, c.want)
		}
	}
}
