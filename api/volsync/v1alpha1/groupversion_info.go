// Package v1alpha1 is VolSync's volsync.backube/v1alpha1 API as strata
// serves it: ReplicationSource and ReplicationDestination, with the
// field names, status fields and condition reasons VolSync documents, so
// a repository that uses VolSync keeps its objects. strata reconciles
// only the objects whose spec.external.provider is one of its movers
// (strata.dev/btrfs); the other movers' fields (rsync, restic, rclone,
// syncthing) are kept as written for VolSync itself. VolSync's Go module
// cannot be fetched here, so these types are strata's own, and the CRDs
// generated from them are installed only where VolSync's are not.
// +kubebuilder:object:generate=true
// +groupName=volsync.backube
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is VolSync's API group and version.
	GroupVersion  = schema.GroupVersion{Group: "volsync.backube", Version: "v1alpha1"}
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ReplicationSource{}, &ReplicationSourceList{},
		&ReplicationDestination{}, &ReplicationDestinationList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
