package kustomization

import (
	"context"
	"testing"

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
