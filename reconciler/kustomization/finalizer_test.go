package kustomization_test

import (
	"context"
	"fmt"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/kustomization"
)

// Kustomizations that carry Flux's finalizer from their creation, as the
// chart's admission policy gives it to them, are the controller's to
// finalize as any other: one that applied has its objects pruned when it
// is deleted, and one deleted before it applied anything is let go.
func TestAFinalizerFromCreationIsFinalized(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/a.yaml": configMap("a")})
	s.source(rev)
	fromCreation := func(k *kustomizev1.Kustomization) { k.Finalizers = []string{kustomization.Finalizer} }
	app := s.kustomization("app", "./app", fromCreation)
	s.waitReady("app", rev)
	never := s.kustomization("never", "./app", func(k *kustomizev1.Kustomization) {
		fromCreation(k)
		k.Spec.Suspend = true
	})
	if !s.exists(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}) {
		t.Fatal("app did not apply ConfigMap a")
	}

	ctx := context.Background()
	for _, k := range []*kustomizev1.Kustomization{never, app} {
		if err := s.c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, timeout, func() error {
		for _, k := range []*kustomizev1.Kustomization{never, app} {
			if s.exists(&kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: k.Name}}) {
				return fmt.Errorf("Kustomization %s is still there", k.Name)
			}
		}
		if s.exists(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}) {
			return fmt.Errorf("ConfigMap a was not pruned with app")
		}
		return nil
	})
}
