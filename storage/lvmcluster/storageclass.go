package lvmcluster

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// Keys on the StorageClass; those the CSI driver reads are in the API
// package.
const (
	fsTypeParameter = "csi.storage.k8s.io/fstype"
	// OwnerLabel names the LVMCluster (namespace.name) a StorageClass is for.
	OwnerLabel        = "storage.strata.dev/lvmcluster"
	defaultAnnotation = "storageclass.kubernetes.io/is-default-class"
)

// storageClass is what the class's StorageClass must be.
func storageClass(cluster *storagev1alpha1.LVMCluster, dc storagev1alpha1.DeviceClass) *storagev1.StorageClass {
	opts := dc.StorageClassOptions
	if opts == nil {
		opts = &storagev1alpha1.StorageClassOptions{}
	}
	fstype := dc.FSType
	if fstype == "" {
		fstype = "xfs"
	}
	params := map[string]string{}
	maps.Copy(params, opts.AdditionalParameters)
	params[storagev1alpha1.DeviceClassParameter] = dc.Name
	params[storagev1alpha1.StorageClassParameter] = storagev1alpha1.StorageClassName(dc.Name)
	params[fsTypeParameter] = fstype
	labels := map[string]string{}
	maps.Copy(labels, opts.AdditionalLabels)
	labels[OwnerLabel] = cluster.Namespace + "." + cluster.Name
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: storagev1alpha1.StorageClassName(dc.Name), Labels: labels,
			Annotations: map[string]string{defaultAnnotation: "false"}},
		Provisioner:          storagev1alpha1.CSIDriver,
		Parameters:           params,
		ReclaimPolicy:        ptr.To(ptr.Deref(opts.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete)),
		VolumeBindingMode:    ptr.To(ptr.Deref(opts.VolumeBindingMode, storagev1.VolumeBindingWaitForFirstConsumer)),
		AllowVolumeExpansion: ptr.To(true),
	}
	if dc.Default {
		sc.Annotations[defaultAnnotation] = "true"
	}
	return sc
}

// immutableChanged says whether the API server would refuse to update
// have into want: those fields of a StorageClass cannot change.
func immutableChanged(have, want *storagev1.StorageClass) bool {
	return have.Provisioner != want.Provisioner || !maps.Equal(have.Parameters, want.Parameters) ||
		ptr.Deref(have.ReclaimPolicy, "") != ptr.Deref(want.ReclaimPolicy, "") ||
		ptr.Deref(have.VolumeBindingMode, "") != ptr.Deref(want.VolumeBindingMode, "")
}
