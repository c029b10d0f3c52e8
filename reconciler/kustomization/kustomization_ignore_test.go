package kustomization_test

import (
	"context"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestIgnoredFieldsAreLeftToOthers: spec.ignore leaves /spec/replicas to
// an autoscaler; a reconcile after it scaled keeps its value, while the
// rest of the Deployment is still Git's.
func TestIgnoredFieldsAreLeftToOthers(t *testing.T) {
	s := newStack(t)
	web1 := strings.Replace(neverReadyDeployment, "spec:\n  selector:", "spec:\n  replicas: 1\n  selector:", 1)
	rev := s.push(map[string]string{"app/web.yaml": web1})
	s.source(rev)
	s.kustomization("app", "./app", func(ks *kustomizev1.Kustomization) {
		ks.Spec.Ignore = []kustomizev1.IgnoreRule{{Paths: []string{"/spec/replicas"}, Target: &kustomize.Selector{Kind: "Deployment"}}}
	})
	s.waitReady("app", rev)
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: s.ns}}
	scale := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`))
	if err := s.c.Patch(context.Background(), web, scale, client.FieldOwner("autoscaler")); err != nil {
		t.Fatal(err)
	}
	// A change in Git to the same Deployment is applied around the value.
	rev = s.push(map[string]string{"app/web.yaml": strings.Replace(web1, "image: nginx", "image: nginx:1.27", 1)})
	s.refresh(rev)
	s.waitReady("app", rev)
	if !s.exists(web) || web.Spec.Replicas == nil || *web.Spec.Replicas != 5 || web.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Fatalf("after the apply: replicas %v, image %s; want the autoscaler's 5 and Git's nginx:1.27", web.Spec.Replicas, web.Spec.Template.Spec.Containers[0].Image)
	}
}
