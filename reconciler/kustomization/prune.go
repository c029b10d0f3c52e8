package kustomization

import (
	"context"
	"errors"
	"fmt"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/reconciler/apply"
	"github.com/strata-gitops/strata/reconciler/guard"
)

// prune deletes what left Git since the last apply (when spec.prune is set)
// and records the new inventory. Objects the guard protects stay, stay in
// the inventory (so adding the opt-in later prunes them) and are listed in
// the DataProtected condition.
func (r *Reconciler) prune(ctx context.Context, e *engine, obj *kustomizev1.Kustomization, cs *ssa.ChangeSet) error {
	inv := apply.Inventory(cs)
	var blocked []*guard.Blocked
	if from, moved := e.cluster.movedFrom(obj); moved && obj.Spec.Prune {
		// The inventory's objects are on another cluster: pruning them
		// here would delete same-named objects of this one, and there
		// they are out of reach. They are left, and said so.
		r.Events.Eventf(obj, nil, corev1.EventTypeWarning, "PruneSkipped", "Prune",
			"the objects of the previous inventory are on %s, not on the cluster this Kustomization now applies to; they were left there, not pruned", from)
	} else if obj.Spec.Prune {
		stale := apply.StaleEntries(obj.Status.Inventory, inv)
		deletable, held, err := r.partition(ctx, e, obj, apply.Objects(stale))
		if err != nil {
			return err
		}
		if err := r.deleteAll(ctx, e, obj, deletable); err != nil {
			return err
		}
		blocked = held
		inv.Entries = append(inv.Entries, entriesOf(stale, held)...)
		apply.SortInventory(inv)
	}
	obj.Status.Inventory = inv
	e.cluster.record(obj)
	recordBlocked(obj, blocked)
	return nil
}

// partition sorts objects about to be deleted into those that may go and
// those the guard keeps. Objects already gone, adopted by another
// Kustomization (a rename must not delete them, Flux #3316) or annotated
// with prune: disabled are left alone entirely.
func (r *Reconciler) partition(ctx context.Context, e *engine, obj *kustomizev1.Kustomization, objects []*unstructured.Unstructured) (deletable []*unstructured.Unstructured, blocked []*guard.Blocked, err error) {
	owner := e.manager.GetOwnerLabels(obj.Name, obj.Namespace)
	for _, o := range objects {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := e.target.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				continue
			}
			return nil, nil, fmt.Errorf("reading %s before deleting it: %w", guard.ObjectID(o), err)
		}
		if !hasLabels(live, owner) || apply.PruneDisabled(live) {
			continue
		}
		if err := guard.Check(ctx, e.target, live, obj); err != nil {
			var b *guard.Blocked
			if !errors.As(err, &b) {
				return nil, nil, err
			}
			r.Events.Eventf(obj, live, corev1.EventTypeWarning, DeletionBlockedReason, "Delete", "%s", b.Error())
			blocked = append(blocked, b)
			continue
		}
		deletable = append(deletable, live)
	}
	return deletable, blocked, nil
}

func (r *Reconciler) deleteAll(ctx context.Context, e *engine, obj *kustomizev1.Kustomization, objects []*unstructured.Unstructured) error {
	if len(objects) == 0 {
		return nil
	}
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = e.manager.GetOwnerLabels(obj.Name, obj.Namespace)
	opts.Exclusions = map[string]string{apply.PruneKey: kustomizev1.DisabledValue}
	cs, err := e.manager.DeleteAll(ctx, objects, opts)
	if cs != nil && len(cs.Entries) > 0 {
		r.Events.Eventf(obj, nil, corev1.EventTypeNormal, "Progressing", "Prune", "%s", cs.String())
	}
	return err
}

func recordBlocked(obj *kustomizev1.Kustomization, blocked []*guard.Blocked) {
	if len(blocked) == 0 {
		status.Remove(obj, DataProtectedCondition)
		return
	}
	msgs := make([]string, len(blocked))
	for i, b := range blocked {
		msgs[i] = b.Error()
	}
	status.Set(obj, DataProtectedCondition, metav1.ConditionTrue, DeletionBlockedReason,
		fmt.Sprintf("%d deletion(s) blocked to protect data:\n%s", len(blocked), strings.Join(msgs, "\n")))
}

// entriesOf returns the inventory entries of the blocked objects.
func entriesOf(entries []kustomizev1.ResourceRef, blocked []*guard.Blocked) []kustomizev1.ResourceRef {
	ids := map[string]bool{}
	for _, b := range blocked {
		ids[b.Object] = true
	}
	var out []kustomizev1.ResourceRef
	for _, e := range entries {
		for _, o := range apply.Objects([]kustomizev1.ResourceRef{e}) {
			if ids[guard.ObjectID(o)] {
				out = append(out, e)
			}
		}
	}
	return out
}

func hasLabels(o client.Object, want map[string]string) bool {
	for k, v := range want {
		if o.GetLabels()[k] != v {
			return false
		}
	}
	return true
}
