package apply

import kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"

// DeletesOnRemoval says whether deleting the Kustomization deletes what it
// applied (spec.deletionPolicy, with Flux's MirrorPrune default).
func DeletesOnRemoval(obj *kustomizev1.Kustomization) bool {
	switch obj.GetDeletionPolicy() {
	case kustomizev1.DeletionPolicyDelete, kustomizev1.DeletionPolicyWaitForTermination:
		return true
	case kustomizev1.DeletionPolicyMirrorPrune:
		return obj.Spec.Prune
	}
	return false
}
