// Package lvmcluster is the controller side of an LVMCluster: a
// StorageClass per device class, and the status aggregated from what the
// nodes' agents report.
package lvmcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/finalizer"
	"github.com/strata-gitops/strata/internal/status"
)

// Finalizer lets the controller decide what goes with a deleted LVMCluster.
const Finalizer = "storage.strata.dev/lvmcluster"

// Reconciler manages StorageClasses and status for LVMClusters.
type Reconciler struct {
	client.Client
	Events events.EventRecorder
}

// SetupWithManager also follows the agents' node statuses.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	clustersOfNamespace := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &storagev1alpha1.LVMClusterList{}
		if err := r.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, c := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&storagev1alpha1.LVMCluster{}).
		Watches(&storagev1alpha1.LVMVolumeGroupNodeStatus{}, clustersOfNamespace).
		Complete(r)
}

// Reconcile ensures the StorageClasses and aggregates the status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &storagev1alpha1.LVMCluster{}
	finalize := func(ctx context.Context) error { return r.finalize(ctx, obj) }
	if proceed, err := finalizer.Begin(ctx, r, req.NamespacedName, obj, Finalizer, finalize); !proceed {
		return ctrl.Result{}, err
	}
	before := obj.DeepCopy()
	err := r.ensureStorageClasses(ctx, obj)
	if err == nil {
		err = r.ensureSnapshotClasses(ctx, obj)
	}
	if err == nil {
		err = r.aggregate(ctx, obj)
	} else {
		obj.Status.State, obj.Status.Ready = storagev1alpha1.StateFailed, false
		status.MarkFailed(obj, "StorageClassFailed", err.Error(), false)
	}
	obj.Status.ObservedGeneration = obj.Generation
	if perr := status.Patch(ctx, r.Client, before, obj); perr != nil {
		return ctrl.Result{}, perr
	}
	return ctrl.Result{}, err
}

// ensureStorageClasses creates or updates each class's StorageClass;
// one whose immutable fields changed is replaced (a StorageClass holds no
// data: bound volumes keep their PersistentVolumes).
func (r *Reconciler) ensureStorageClasses(ctx context.Context, obj *storagev1alpha1.LVMCluster) error {
	for _, dc := range obj.Spec.Storage.DeviceClasses {
		want := storageClass(obj, dc)
		have := &storagev1.StorageClass{}
		err := r.Get(ctx, client.ObjectKeyFromObject(want), have)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Create(ctx, want); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		if owner := have.Labels[OwnerLabel]; owner != want.Labels[OwnerLabel] {
			return fmt.Errorf("StorageClass %s belongs to LVMCluster %s, not this one: rename device class %s", want.Name, owner, dc.Name)
		}
		if immutableChanged(have, want) {
			if err := r.refuseFSTypeChangeInUse(ctx, have, want, dc.Name); err != nil {
				return err
			}
			if err := r.Delete(ctx, have); err != nil {
				return err
			}
			if err := r.Create(ctx, want); err != nil {
				return err
			}
			continue
		}
		patch := client.MergeFrom(have.DeepCopy())
		have.Labels, have.Annotations, have.AllowVolumeExpansion = want.Labels, want.Annotations, want.AllowVolumeExpansion
		if err := r.Patch(ctx, have, patch); err != nil {
			return err
		}
	}
	return nil
}

// refuseFSTypeChangeInUse stops a class's filesystem from changing while
// volumes of it exist: they keep the old one, and the class would then
// promise a filesystem some of its volumes do not have.
func (r *Reconciler) refuseFSTypeChangeInUse(ctx context.Context, have, want *storagev1.StorageClass, class string) error {
	from, to := have.Parameters[fsTypeParameter], want.Parameters[fsTypeParameter]
	if from == to {
		return nil
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := r.List(ctx, pvs); err != nil {
		return err
	}
	var using []string
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName == have.Name {
			using = append(using, pv.Name)
		}
	}
	if len(using) == 0 {
		return nil
	}
	return fmt.Errorf("device class %s: fstype cannot change from %s to %s while %d volumes use it (%s): they would keep %s; "+
		"add a new device class for %s instead", class, from, to, len(using), strings.Join(using, ", "), from, to)
}

// aggregate copies the agents' per-node class statuses into the
// LVMCluster and sums them up.
func (r *Reconciler) aggregate(ctx context.Context, obj *storagev1alpha1.LVMCluster) error {
	nodes := &storagev1alpha1.LVMVolumeGroupNodeStatusList{}
	if err := r.List(ctx, nodes, client.InNamespace(obj.Namespace)); err != nil {
		return err
	}
	obj.Status.DeviceClassStatuses = nil
	var failed, reported []string
	for _, dc := range obj.Spec.Storage.DeviceClasses {
		st := storagev1alpha1.DeviceClassStatus{Name: dc.Name}
		for _, n := range nodes.Items {
			for _, c := range n.Status.DeviceClasses {
				if c.VolumeGroup != dc.Name {
					continue
				}
				st.Nodes = append(st.Nodes, c)
				reported = append(reported, c.Node)
				if c.State != storagev1alpha1.StateReady {
					failed = append(failed, dc.Name+" on "+c.Node+": "+c.Reason)
				}
			}
		}
		obj.Status.DeviceClassStatuses = append(obj.Status.DeviceClassStatuses, st)
	}
	switch {
	case len(failed) > 0:
		obj.Status.State, obj.Status.Ready = "Degraded", false
		status.MarkFailed(obj, "DeviceClassFailed", strings.Join(failed, "; "), false)
	case len(reported) == 0:
		obj.Status.State, obj.Status.Ready = "Progressing", false
		status.MarkReconciling(obj, "waiting for the nodes' agents to report")
	default:
		obj.Status.State, obj.Status.Ready = storagev1alpha1.StateReady, true
		status.MarkReady(obj, meta.SucceededReason, fmt.Sprintf("%d device classes ready on their nodes", len(obj.Spec.Storage.DeviceClasses)))
	}
	return nil
}

// finalize lets the LVMCluster go. Volume groups and data stay on the
// nodes whatever happens here; StorageClasses go only when no
// PersistentVolume uses them (expansion reads the class).
func (r *Reconciler) finalize(ctx context.Context, obj *storagev1alpha1.LVMCluster) error {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return nil
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := r.List(ctx, pvs); err != nil {
		return err
	}
	for _, dc := range obj.Spec.Storage.DeviceClasses {
		name := storagev1alpha1.StorageClassName(dc.Name)
		if slices.ContainsFunc(pvs.Items, func(pv corev1.PersistentVolume) bool { return pv.Spec.StorageClassName == name }) {
			r.event(obj, corev1.EventTypeNormal, "StorageClassKept", "StorageClass %s is kept: PersistentVolumes still use it", name)
			continue
		}
		sc := &storagev1.StorageClass{}
		sc.Name = name
		if err := r.Delete(ctx, sc); client.IgnoreNotFound(err) != nil {
			return err
		}
		if err := r.removeSnapshotClass(ctx, dc.Name); err != nil {
			return err
		}
	}
	return finalizer.Release(ctx, r, obj, Finalizer)
}

func (r *Reconciler) event(obj client.Object, kind, reason, format string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(obj, nil, kind, reason, reason, format, args...)
	}
}
