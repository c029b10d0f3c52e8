package kustomization

import (
	"fmt"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
)

// checkAccess refuses, when cross-namespace references are turned off
// (--no-cross-namespace-refs, Flux's multi-tenancy lockdown), a source or
// dependency in another namespace: a tenant's Kustomization must not
// build from, or wait on, another tenant's objects.
func (r *Reconciler) checkAccess(obj *kustomizev1.Kustomization) error {
	if !r.NoCrossNamespaceRefs {
		return nil
	}
	if ns := obj.Spec.SourceRef.Namespace; ns != "" && ns != obj.Namespace {
		return fmt.Errorf("cannot access %s/%s/%s: cross-namespace references are disabled on this controller (--no-cross-namespace-refs); "+
			"put the source in namespace %s", obj.Spec.SourceRef.Kind, ns, obj.Spec.SourceRef.Name, obj.Namespace)
	}
	for _, dep := range obj.Spec.DependsOn {
		if dep.Namespace != "" && dep.Namespace != obj.Namespace {
			return fmt.Errorf("cannot depend on Kustomization %s/%s: cross-namespace references are disabled on this controller (--no-cross-namespace-refs)",
				dep.Namespace, dep.Name)
		}
	}
	return nil
}

// serviceAccountOf is the service account the Kustomization applies as:
// its own, else the controller's default (--default-service-account),
// else none, meaning the controller's identity.
func (r *Reconciler) serviceAccountOf(obj *kustomizev1.Kustomization) string {
	if obj.Spec.ServiceAccountName != "" {
		return obj.Spec.ServiceAccountName
	}
	return r.DefaultServiceAccount
}
