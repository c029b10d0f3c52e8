package apply

import (
	"errors"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
)

// errRemoteCluster refuses a Kustomization that targets another cluster.
var errRemoteCluster = errors.New("spec.kubeConfig asks to apply to another cluster, which strata does not do: " +
	"applied here, its objects would land in this cluster and be pruned from it. " +
	"Remove spec.kubeConfig to apply to this cluster, or reconcile this Kustomization with Flux's kustomize-controller")

// Unsupported says why the engine refuses obj without rendering it: a
// field asking for something strata does not do, where going on without
// it would apply to the wrong place. strata plan reports the same.
func Unsupported(obj *kustomizev1.Kustomization) error {
	if obj.Spec.KubeConfig != nil {
		return errRemoteCluster
	}
	return nil
}
