package kustomization_test

import (
	"context"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/acl"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/app/manager"
)

// With --default-service-account, a Kustomization that names no service
// account applies as that account of its namespace, not as the
// controller: what the account may not do fails, naming it.
func TestDefaultServiceAccountAppliesAsTheTenant(t *testing.T) {
	s := newStack(t, func(o *manager.Options) { o.DefaultServiceAccount = "tenant" })
	s.tenant(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}})
	rev := s.push(map[string]string{
		"allowed/cm.yaml": configMap("allowed"),
		"denied/sa.yaml":  "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: escalate\n",
		"denied/cm.yaml":  configMap("with-denied"),
	})
	s.source(rev)
	s.kustomization("allowed", "./allowed", nil)
	s.waitReady("allowed", rev)
	s.kustomization("denied", "./denied", nil)
	s.waitCondition("denied", meta.ReadyCondition, metav1.ConditionFalse, meta.ReconciliationFailedReason,
		"system:serviceaccount:"+s.ns+":tenant")
	if s.exists(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "escalate"}}) {
		t.Fatal("a Kustomization without a service account applied what the default account may not")
	}
}

// A tenant that may apply Deployments needs no rights on strata's
// Failovers: strata reads them itself to keep a failed-over app on its
// backup claim.
func TestATenantAppliesADeploymentWithoutRightsOnFailovers(t *testing.T) {
	s := newStack(t, func(o *manager.Options) { o.DefaultServiceAccount = "tenant" })
	s.tenant(rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}})
	rev := s.push(map[string]string{"app/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 0
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers: [{name: app, image: example-app}]
`})
	s.source(rev)
	s.kustomization("app", "./app", nil)
	s.waitReady("app", rev)
	if !s.exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app"}}) {
		t.Fatal("the tenant's Deployment was not applied")
	}
}

// tenant is the service account "tenant" of the stack's namespace, with a
// role of the rules.
func (s *stack) tenant(rules ...rbacv1.PolicyRule) {
	s.t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: s.ns}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: s.ns}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: s.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: s.ns}}}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := s.c.Create(context.Background(), obj); err != nil {
			s.t.Fatal(err)
		}
	}
}

// With --no-cross-namespace-refs, a source in another namespace is
// refused, and nothing is applied.
func TestNoCrossNamespaceRefs(t *testing.T) {
	s := newStack(t, func(o *manager.Options) { o.NoCrossNamespaceRefs = true })
	rev := s.push(map[string]string{"app/cm.yaml": configMap("a")})
	s.source(rev)
	s.kustomization("other-source", "./app", func(k *kustomizev1.Kustomization) { k.Spec.SourceRef.Namespace = "flux-system" })
	s.waitCondition("other-source", meta.ReadyCondition, metav1.ConditionFalse, acl.AccessDeniedReason, "--no-cross-namespace-refs")
	s.kustomization("other-dependency", "./app", func(k *kustomizev1.Kustomization) {
		k.Spec.DependsOn = []kustomizev1.DependencyReference{{Namespace: "flux-system", Name: "infra"}}
	})
	s.waitCondition("other-dependency", meta.ReadyCondition, metav1.ConditionFalse, acl.AccessDeniedReason, "flux-system/infra")
	if s.exists(cm("a")) {
		t.Fatal("a Kustomization with a cross-namespace source was applied")
	}
	s.kustomization("same-namespace", "./app", nil)
	s.waitReady("same-namespace", rev)
}
