// Package scheme builds the runtime scheme every strata process uses: the
// Kubernetes built-ins, Flux's source, kustomize and notification kinds,
// and strata's own.
package scheme

import (
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	buildbarnv1alpha1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
)

// New returns a scheme with every kind strata reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		sourcev1.AddToScheme,
		kustomizev1.AddToScheme,
		notificationv1.AddToScheme,
		// Flux's Alerts and Providers, which route strata's events too.
		notificationv1beta3.AddToScheme,
		storagev1alpha1.AddToScheme,
		failoverv1alpha1.AddToScheme,
		volsyncv1alpha1.AddToScheme,
		buildbarnv1alpha1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}
