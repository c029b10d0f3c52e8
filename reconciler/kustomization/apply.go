package kustomization

import (
	"context"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-gitops/strata/reconciler/apply"
)

// apply server-side applies the objects in stages (CRDs and Namespaces
// first, as Flux does) and returns what changed.
func (r *Reconciler) apply(ctx context.Context, e *engine, obj *kustomizev1.Kustomization, objects []*unstructured.Unstructured) (*ssa.ChangeSet, error) {
	// Failovers are read from the manager's cache, where their informer
	// runs: a request per reconcile saved, and no stale read that the
	// Failover controller would not mend, since it moves a workload it
	// sees on the wrong claim back at once.
	if err := apply.PrepareObjects(ctx, e.manager, e.client, r.Client, obj, objects); err != nil {
		return nil, err
	}
	opts := apply.Options(obj)
	e.skip.Expect(objects, obj.Status.Inventory, opts.ExclusionSelector)
	defer e.skip.Done()
	return e.manager.ApplyAllStaged(ctx, objects, opts)
}
