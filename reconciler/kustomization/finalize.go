package kustomization

import (
	"context"
	"fmt"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/strata-gitops/strata/internal/finalizer"
	"github.com/strata-gitops/strata/reconciler/apply"
)

// finalize applies spec.deletionPolicy when a Kustomization is deleted:
// MirrorPrune deletes its objects when prune is on, Delete and
// WaitForTermination always do, Orphan never does. Objects holding data are
// kept unless opted in; a suspended Kustomization deletes nothing, as in Flux.
func (r *Reconciler) finalize(ctx context.Context, obj *kustomizev1.Kustomization) error {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return nil
	}
	if shouldDeleteObjects(obj) {
		if err := r.deleteInventory(ctx, obj); err != nil {
			return err
		}
	}
	r.memo.Records.Forget(client.ObjectKeyFromObject(obj))
	return finalizer.Release(ctx, r.Client, obj, Finalizer)
}

func shouldDeleteObjects(obj *kustomizev1.Kustomization) bool {
	return !obj.Spec.Suspend && obj.Status.Inventory != nil && apply.DeletesOnRemoval(obj)
}

func (r *Reconciler) deleteInventory(ctx context.Context, obj *kustomizev1.Kustomization) error {
	e, err := r.engine(ctx, obj)
	if err != nil {
		return err
	}
	deletable, _, err := r.partition(ctx, e, obj, apply.Objects(obj.Status.Inventory.Entries))
	if err != nil {
		return err
	}
	if err := r.deleteAll(ctx, e, obj, deletable); err != nil {
		return fmt.Errorf("deleting the objects of Kustomization %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	if obj.GetDeletionPolicy() != kustomizev1.DeletionPolicyWaitForTermination {
		return nil
	}
	cs := ssa.NewChangeSet()
	for _, o := range deletable {
		cs.Add(ssa.ChangeSetEntry{ObjMetadata: apply.ObjMetadata(o), GroupVersion: o.GroupVersionKind().Version})
	}
	return e.manager.WaitForSetTermination(cs, ssa.WaitOptions{Interval: healthPollInterval, Timeout: obj.GetTimeout()})
}
