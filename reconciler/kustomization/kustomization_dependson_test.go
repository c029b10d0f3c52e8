package kustomization_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/strata-gitops/strata/reconciler/kustomization"
)

func dependsOn(names ...string) func(*kustomizev1.Kustomization) {
	return func(k *kustomizev1.Kustomization) {
		for _, n := range names {
			k.Spec.DependsOn = append(k.Spec.DependsOn, meta.DependencyReference{Name: n})
		}
	}
}

// TestDependsOnChainAppliesInOrderWithoutPolling creates a five-level chain
// in reverse order and watches ConfigMaps appear on the API server: they
// must appear in dependency order, and the chain must finish far sooner
// than the 30 s fallback requeue, which only event-driven ordering allows.
func TestDependsOnChainAppliesInOrderWithoutPolling(t *testing.T) {
	s := newStack(t)
	chain := []string{"crds", "controllers", "storage", "operations", "apps"}
	files := map[string]string{}
	for _, n := range chain {
		files[n+"/cm.yaml"] = configMap(n)
	}
	rev := s.push(files)
	s.source(rev)

	w, err := s.env.Clientset().CoreV1().ConfigMaps(s.ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	start := time.Now()
	for i := len(chain) - 1; i >= 0; i-- {
		var mutate func(*kustomizev1.Kustomization)
		if i > 0 {
			mutate = dependsOn(chain[i-1])
		}
		s.kustomization(chain[i], "./"+chain[i], mutate)
	}
	var order []string
	deadline := time.After(timeout)
	for len(order) < len(chain) {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Added {
				if o, ok := ev.Object.(*corev1.ConfigMap); ok && o.Name != "kube-root-ca.crt" {
					order = append(order, o.Name)
				}
			}
		case <-deadline:
			for _, n := range chain {
				t.Logf("%s: %+v exists=%v", n, s.get(n).Status.Inventory, s.exists(cm(n)))
			}
			t.Fatalf("chain incomplete after %s: applied %v", timeout, order)
		}
	}
	if fmt.Sprint(order) != fmt.Sprint(chain) {
		t.Errorf("applied in order %v, want %v", order, chain)
	}
	for _, n := range chain {
		s.waitReady(n, rev)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("chain of %d took %s: dependents are not enqueued when their dependency becomes ready", len(chain), took)
	}
}

func TestDependencyCycleStallsEveryMember(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"a/cm.yaml": configMap("a"), "b/cm.yaml": configMap("b"), "c/cm.yaml": configMap("c")})
	s.source(rev)
	s.kustomization("a", "./a", dependsOn("b"))
	s.kustomization("b", "./b", dependsOn("c"))
	s.kustomization("c", "./c", dependsOn("a"))
	s.waitCondition("a", meta.StalledCondition, metav1.ConditionTrue, kustomization.DependencyCycleReason, "a -> b -> c -> a")
	s.waitCondition("b", meta.StalledCondition, metav1.ConditionTrue, kustomization.DependencyCycleReason, "b -> c -> a -> b")
	s.waitCondition("c", meta.ReadyCondition, metav1.ConditionFalse, kustomization.DependencyCycleReason, "c -> a -> b -> c")
	for _, n := range []string{"a", "b", "c"} {
		if s.exists(cm(n)) {
			t.Errorf("ConfigMap %s of a cycle member was applied", n)
		}
	}

	// Breaking the cycle releases all three.
	c := s.get("c")
	c.Spec.DependsOn = nil
	if err := s.c.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"c", "b", "a"} {
		s.waitReady(n, rev)
	}
}

func TestMissingDependencyIsNamed(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"a/cm.yaml": configMap("a")})
	s.source(rev)
	s.kustomization("a", "./a", dependsOn("ghost"))
	s.waitCondition("a", meta.ReadyCondition, metav1.ConditionFalse, meta.DependencyNotReadyReason, "dependency '"+s.ns+"/ghost' not found")
	if s.exists(cm("a")) {
		t.Error("Kustomization with a missing dependency was applied")
	}
}

func TestReadyExprReplacesBuiltInCheck(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"a/cm.yaml": configMap("a"), "b/cm.yaml": configMap("b")})
	s.source(rev)
	// The dependency is suspended, so never Ready; the expression accepts it
	// on a label instead.
	s.kustomization("a", "./a", func(k *kustomizev1.Kustomization) {
		k.Spec.Suspend = true
		k.Labels["tier"] = "base"
	})
	s.kustomization("b", "./b", func(k *kustomizev1.Kustomization) {
		k.Spec.DependsOn = []meta.DependencyReference{{Name: "a", ReadyExpr: "dep.metadata.labels.tier == 'base'"}}
	})
	s.waitReady("b", rev)

	s.kustomization("c", "./b", func(k *kustomizev1.Kustomization) {
		k.Spec.DependsOn = []meta.DependencyReference{{Name: "a", ReadyExpr: "dep.metadata.labels.tier == 'top'"}}
	})
	s.waitCondition("c", meta.ReadyCondition, metav1.ConditionFalse, meta.DependencyNotReadyReason, "readyExpr")
	s.kustomization("d", "./b", func(k *kustomizev1.Kustomization) {
		k.Spec.DependsOn = []meta.DependencyReference{{Name: "a", ReadyExpr: "dep.metadata.labels.tier +"}}
	})
	s.waitCondition("d", meta.StalledCondition, metav1.ConditionTrue, meta.InvalidCELExpressionReason, "readyExpr")
}
