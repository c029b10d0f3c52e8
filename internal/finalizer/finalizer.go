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
