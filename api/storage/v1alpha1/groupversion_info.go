// Package v1alpha1 holds the storage.strata.dev API: LVMCluster (disks to
// volume groups and thin pools, as declared in Git), the per-node status
// the agents write, and LogicalVolume, the hand-off between the CSI
// controller and a node's agent.
// +kubebuilder:object:generate=true
// +groupName=storage.strata.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "storage.strata.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the kinds.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
