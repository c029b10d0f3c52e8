package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/reconciler/apply"
)

// apply sends want with server-side apply under strata's field manager,
// so fields strata does not set (the API server's defaults, a user's
// kubectl scale on another manager) are left alone, and records an
// event when it created or changed the object. want is filled with what
// the API server returned.
func (r *Reconciler) apply(ctx context.Context, s *scope, want client.Object) error {
	kind := want.GetObjectKind().GroupVersionKind().Kind
	live := want.DeepCopyObject().(client.Object)
	err := r.Get(ctx, client.ObjectKeyFromObject(want), live)
	existed := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	u, err := toApply(want)
	if err != nil {
		return err
	}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(apply.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", kind, want.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, want); err != nil {
		return err
	}
	switch {
	case !existed:
		r.event(s, "Created", "created %s %s", kind, want.GetName())
	case live.GetResourceVersion() != want.GetResourceVersion():
		r.event(s, "Updated", "changed %s %s", kind, want.GetName())
	}
	return nil
}

// toApply turns a typed object into the apply request: no status, and no
// empty creation timestamps, which strata does not own.
func toApply(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
	if claims, ok, _ := unstructured.NestedSlice(m, "spec", "volumeClaimTemplates"); ok {
		for _, c := range claims {
			if cm, ok := c.(map[string]any); ok {
				delete(cm, "status")
				unstructured.RemoveNestedField(cm, "metadata", "creationTimestamp")
			}
		}
		_ = unstructured.SetNestedSlice(m, claims, "spec", "volumeClaimTemplates")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// deleteOwned removes an object of the component's that is no longer
// wanted (an Ingress whose host was cleared); one that is not there, or
// that is not the component's, is left.
func (r *Reconciler) deleteOwned(ctx context.Context, s *scope, obj client.Object) error {
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !ownedBy(obj, s.obj) {
		return nil
	}
	if err := r.Delete(ctx, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.event(s, "Deleted", "deleted %s %s, which the spec no longer asks for", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	return nil
}

func ownedBy(obj, owner client.Object) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}
