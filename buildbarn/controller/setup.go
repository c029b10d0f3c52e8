package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-gitops/strata/buildbarn/objects"
	"github.com/strata-gitops/strata/internal/finalizer"
	"github.com/strata-gitops/strata/internal/whenused"
)

// setup watches the kind, what it owns, the other components of its
// namespace (an added shard changes every client's configuration) and
// the users' ConfigMaps that replace generated ones.
func (r *Reconciler) setup(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("buildbarn-"+r.kind.component).
		For(r.kind.newObject()).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.Ingress{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.usersOfConfigMap))
	if r.kind == storage {
		b = b.Owns(&appsv1.StatefulSet{}).
			Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(storageOfClaim))
	} else {
		b = b.Owns(&appsv1.Deployment{})
	}
	for _, other := range kinds {
		b = b.Watches(other.newObject(), handler.EnqueueRequestsFromMapFunc(r.allInNamespace))
	}
	return b.Complete(r)
}

// storageOfClaim queues the storage whose shard a claim is: a claim
// that was waiting for its volume can grow once bound.
func storageOfClaim(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[objects.ComponentLabel] != storage.component || l[objects.InstanceLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: l[objects.InstanceLabel]}}}
}

// allInNamespace queues every component of this kind in o's namespace.
func (r *Reconciler) allInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.queue(ctx, o.GetNamespace(), func(Object) bool { return true })
}

// usersOfConfigMap queues the components whose spec.configMapName is o.
func (r *Reconciler) usersOfConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	return r.queue(ctx, o.GetNamespace(), func(c Object) bool { return c.GetComponent().ConfigMapName == o.GetName() })
}

func (r *Reconciler) queue(ctx context.Context, ns string, match func(Object) bool) []reconcile.Request {
	list := r.kind.newList()
	if err := r.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range r.kind.items(list) {
		if match(c) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// handleDeletion runs the kind's finalizer on a deleted object, and puts
// it on one that lacks it; a kind without one does nothing while its
// object goes (the garbage collector takes what it owned, and must not
// find it made again). done says the reconcile stops here.
func (r *Reconciler) handleDeletion(ctx context.Context, obj Object) (done bool, err error) {
	if r.kind.finalize == nil {
		return !obj.GetDeletionTimestamp().IsZero(), nil
	}
	if obj.GetDeletionTimestamp().IsZero() {
		if err := finalizer.Ensure(ctx, r.Client, obj, StorageFinalizer); err != nil {
			return true, err
		}
		return false, nil
	}
	if err := r.kind.finalize(ctx, r, obj); err != nil {
		return true, err
	}
	return true, finalizer.Release(ctx, r.Client, obj, StorageFinalizer)
}

// SetupWhenUsed registers the controllers once the cluster holds a
// Buildbarn component, and not before. Their watches take in every
// ConfigMap, Service, Deployment, StatefulSet and claim of the cluster:
// where no Buildbarn runs, they cost the API server and the controller
// on every object the engine applies (docs/buildbarn.md) for nothing.
func SetupWhenUsed(mgr ctrl.Manager, events events.EventRecorder, imageRepository string) error {
	var objects []client.Object
	for _, k := range kinds {
		objects = append(objects, k.newObject())
	}
	return whenused.Setup(mgr, "Buildbarn", objects, func() error { return SetupAll(mgr, events, imageRepository) })
}
