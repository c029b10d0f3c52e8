// Package v1alpha1 holds the storage.strata.dev API: LVMCluster (disks to
// volume groups and thin pools, as declared in Git), the per-node status
// the agents write, and LogicalVolume, the hand-off between the CSI
// controller and a node's agent; and VolumeImage, an image claims are
// filled from.
// +kubebuilder:object:generate=true
// +groupName=storage.strata.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of these kinds.
	GroupVersion  = schema.GroupVersion{Group: "storage.strata.dev", Version: "v1alpha1"}
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&LVMCluster{}, &LVMClusterList{},
		&LVMVolumeGroupNodeStatus{}, &LVMVolumeGroupNodeStatusList{},
		&LogicalVolume{}, &LogicalVolumeList{},
		&VolumeImage{}, &VolumeImageList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
