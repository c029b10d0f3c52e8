package lvmcluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// SnapshotClassKind is the external-snapshotter's VolumeSnapshotClass. Its
// API comes with the snapshot CRDs, which a cluster may not have.
var SnapshotClassKind = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotClass"}

// snapshotClass is the VolumeSnapshotClass of a thin device class, named
// like its StorageClass.
func snapshotClass(cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"driver":         storagev1alpha1.CSIDriver,
		"deletionPolicy": "Delete",
		"parameters":     map[string]any{storagev1alpha1.DeviceClassParameter: dc.Name},
	}}
	u.SetGroupVersionKind(SnapshotClassKind)
	u.SetName(storagev1alpha1.StorageClassName(dc.Name))
	u.SetLabels(map[string]string{OwnerLabel: cluster.Namespace + "." + cluster.Name})
	return u
}

// snapshotsServed says whether the cluster has the snapshot API.
func (r *Reconciler) snapshotsServed() (bool, error) {
	_, err := r.RESTMapper().RESTMapping(SnapshotClassKind.GroupKind(), SnapshotClassKind.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// ensureSnapshotClasses gives each thin class a VolumeSnapshotClass where
// the cluster serves the snapshot API; without it there is nothing to do
// (install the external-snapshotter's CRDs, and the next reconcile makes
// them). Thick classes have no snapshots.
func (r *Reconciler) ensureSnapshotClasses(ctx context.Context, obj *storagev1alpha1.LVMCluster) error {
	served, err := r.snapshotsServed()
	if err != nil || !served {
		return err
	}
	for _, dc := range obj.Spec.Storage.DeviceClasses {
		if dc.ThinPoolConfig == nil {
			continue
		}
		want := snapshotClass(obj, dc)
		have := &unstructured.Unstructured{}
		have.SetGroupVersionKind(SnapshotClassKind)
		err := r.Get(ctx, client.ObjectKeyFromObject(want), have)
		switch {
		case apierrors.IsNotFound(err):
			err = r.Create(ctx, want)
		case err == nil && have.GetLabels()[OwnerLabel] != want.GetLabels()[OwnerLabel]:
			err = fmt.Errorf("VolumeSnapshotClass %s belongs to %q, not LVMCluster %s: rename device class %s",
				want.GetName(), have.GetLabels()[OwnerLabel], want.GetLabels()[OwnerLabel], dc.Name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeSnapshotClass deletes a class's VolumeSnapshotClass, if the
// cluster has the API and the class.
func (r *Reconciler) removeSnapshotClass(ctx context.Context, class string) error {
	served, err := r.snapshotsServed()
	if err != nil || !served {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(SnapshotClassKind)
	u.SetName(storagev1alpha1.StorageClassName(class))
	return client.IgnoreNotFound(r.Delete(ctx, u))
}
