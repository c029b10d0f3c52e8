// Package v1alpha1 holds the failover.strata.dev API: Failover, one per
// app, which names an app's workload, its primary and backup claims on
// two nodes, the VolSync pair between them, and the policy by which
// strata fences a lost node, promotes the backup and fails back.
// +kubebuilder:object:generate=true
// +groupName=failover.strata.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of these kinds.
	GroupVersion  = schema.GroupVersion{Group: "failover.strata.dev", Version: "v1alpha1"}
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Failover{}, &FailoverList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
