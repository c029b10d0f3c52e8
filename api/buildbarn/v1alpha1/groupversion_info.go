// Package v1alpha1 holds the buildbarn.strata.dev API: the five
// components of a Buildbarn installation (scheduler, storage, frontend,
// browser and workers), from which strata generates the Buildbarn
// configuration and the Kubernetes objects that run it (docs/buildbarn.md).
// The components in one namespace form one installation.
// +kubebuilder:object:generate=true
// +groupName=buildbarn.strata.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of these kinds.
	GroupVersion  = schema.GroupVersion{Group: "buildbarn.strata.dev", Version: "v1alpha1"}
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&BuildbarnScheduler{}, &BuildbarnSchedulerList{},
		&BuildbarnStorage{}, &BuildbarnStorageList{},
		&BuildbarnFrontend{}, &BuildbarnFrontendList{},
		&BuildbarnBrowser{}, &BuildbarnBrowserList{},
		&BuildbarnWorker{}, &BuildbarnWorkerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
