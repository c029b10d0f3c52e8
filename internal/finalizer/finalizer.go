// Package finalizer adds and releases a controller's finalizer with one
// patch each, as every strata reconciler does before it acts and after it
// has cleaned up.
package finalizer

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure adds name to obj's finalizers unless it is there.
func Ensure(ctx context.Context, c client.Client, obj client.Object, name string) error {
	if controllerutil.ContainsFinalizer(obj, name) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(obj, name)
	return c.Patch(ctx, obj, patch)
}

// Release removes name from obj's finalizers, letting the deletion finish.
func Release(ctx context.Context, c client.Client, obj client.Object, name string) error {
	if !controllerutil.ContainsFinalizer(obj, name) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(obj, name)
	return c.Patch(ctx, obj, patch)
}

// Begin is how every finalizing reconcile starts: it reads obj by key,
// runs finalize when obj is being deleted, and otherwise makes sure obj
// carries the finalizer. proceed says the reconcile goes on with obj; an
// object already gone is done, not an error.
func Begin(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object, name string,
	finalize func(context.Context) error) (proceed bool, err error) {
	if err := c.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return false, finalize(ctx)
	}
	if err := Ensure(ctx, c, obj, name); err != nil {
		return false, err
	}
	return true, nil
}
