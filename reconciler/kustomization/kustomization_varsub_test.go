package kustomization_test

import (
	"context"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPostBuildSubstitution(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/cm.yaml": configMap("vars", "cluster", "${cluster_name}", "region", "${region}", "size", "${size:=10Gi}")})
	s.source(rev)
	if err := s.c.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-vars", Namespace: s.ns},
		Data:       map[string]string{"region": "eu-west", "cluster_name": "overridden"},
	}); err != nil {
		t.Fatal(err)
	}
	s.kustomization("app", "./app", func(k *kustomizev1.Kustomization) {
		k.Spec.PostBuild = &kustomizev1.PostBuild{
			Substitute:     map[string]string{"cluster_name": "homelab"},
			SubstituteFrom: []kustomizev1.SubstituteReference{{Kind: "ConfigMap", Name: "cluster-vars"}},
		}
	})
	s.waitReady("app", rev)
	vars := cm("vars")
	s.exists(vars)
	want := map[string]string{"cluster": "homelab", "region": "eu-west", "size": "10Gi"}
	for k, v := range want {
		if vars.Data[k] != v {
			t.Errorf("%s = %q, want %q (inline substitute must win over substituteFrom)", k, vars.Data[k], v)
		}
	}
}

// TestAChangedSubstituteFromIsAppliedOnRequest: values read from the
// cluster are part of the render, so a reconcile of the same artifact
// renders again and applies them.
func TestAChangedSubstituteFromIsAppliedOnRequest(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/cm.yaml": configMap("vars", "region", "${region}")})
	s.source(rev)
	vars := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster-vars", Namespace: s.ns}, Data: map[string]string{"region": "eu-west"}}
	if err := s.c.Create(context.Background(), vars); err != nil {
		t.Fatal(err)
	}
	s.kustomization("app", "./app", func(k *kustomizev1.Kustomization) {
		k.Spec.PostBuild = &kustomizev1.PostBuild{SubstituteFrom: []kustomizev1.SubstituteReference{{Kind: "ConfigMap", Name: "cluster-vars"}}}
	})
	s.waitReady("app", rev)
	vars.Data["region"] = "us-east"
	if err := s.c.Update(context.Background(), vars); err != nil {
		t.Fatal(err)
	}
	s.waitHandled("app", s.request(s.get("app")))
	applied := cm("vars")
	if s.exists(applied); applied.Data["region"] != "us-east" {
		t.Fatalf("region = %q after the request, want the changed value us-east", applied.Data["region"])
	}
}

func TestFailedSubstitutionChangesNothing(t *testing.T) {
	s := newStack(t)
	rev := s.push(map[string]string{"app/cm.yaml": configMap("vars", "region", "${region}"), "app/b.yaml": configMap("b")})
	s.source(rev)
	s.kustomization("app", "./app", func(k *kustomizev1.Kustomization) {
		k.Spec.PostBuild = &kustomizev1.PostBuild{Substitute: map[string]string{"region": "eu"}}
	})
	s.waitReady("app", rev)

	bad := s.push(map[string]string{"app/b.yaml": ""})
	ks := s.get("app")
	ks.Spec.PostBuild.SubstituteFrom = []kustomizev1.SubstituteReference{{Kind: "ConfigMap", Name: "missing-vars"}}
	if err := s.c.Update(context.Background(), ks); err != nil {
		t.Fatal(err)
	}
	s.refresh(bad)
	s.waitCondition("app", meta.ReadyCondition, metav1.ConditionFalse, meta.BuildFailedReason, "ConfigMap/missing-vars")
	if !s.exists(cm("b")) {
		t.Error("a failed build pruned an object")
	}
	if got := s.get("app").Status.LastAppliedRevision; got != rev {
		t.Errorf("lastAppliedRevision moved to %s after a failed build", got)
	}
}
