package charts

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/reconciler/kustomization"
	"github.com/strata-gitops/strata/sources/git"
)

// mutatingPolicies is how a cluster that serves MutatingAdmissionPolicies
// reports them to Helm.
const mutatingPolicies = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"

// The policy is rendered only for a cluster that serves it, and not when
// it is turned off or the controller serves a labelled share.
func TestTheFinalizerPolicyIsRenderedWhereItServes(t *testing.T) {
	cases := []struct {
		what string
		apis []string
		set  []string
		want int
	}{
		{"a cluster that serves the API", []string{mutatingPolicies}, nil, 2},
		{"a cluster that does not", nil, nil, 0},
		{"turned off", []string{mutatingPolicies}, []string{"controller.finalizerPolicy=false"}, 0},
		{"a sharded controller", []string{mutatingPolicies}, []string{"controller.watchLabelSelector=shard=a"}, 0},
		{"no controller", []string{mutatingPolicies}, []string{"controller.enabled=false"}, 0},
	}
	for _, c := range cases {
		objects := testenv.RenderChartServing(t, "fin", "strata", c.apis, append(slices.Clone(required), c.set...)...)
		if got := len(policyObjects(objects)); got != c.want {
			t.Errorf("%s: %d policy objects rendered, want %d", c.what, got, c.want)
		}
	}
}

// With the chart's policy in place the API server adds Flux's finalizer
// to a Kustomization and a GitRepository as they are created, beside the
// finalizers they bring, and a parent that applies a Kustomization again
// without it does not take it away. The finalizer is the one the
// controllers look for, so they send no patch of their own.
func TestTheAPIServerAddsFluxsFinalizer(t *testing.T) {
	if kustomization.Finalizer != git.Finalizer {
		t.Fatalf("the Kustomization and GitRepository finalizers differ (%s, %s); the policy adds one name", kustomization.Finalizer, git.Finalizer)
	}
	env := testenv.Get(t)
	ctx := context.Background()
	policy := policyObjects(testenv.RenderChartServing(t, "finalizer", "strata", []string{mutatingPolicies}, required...))
	if err := testenv.ApplyStrictly(ctx, env.Client, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, o := range policy {
			_ = env.Client.Delete(context.Background(), o)
		}
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "chart-finalizer"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { letGo(t, env.Client, ns.Name) })

	// The API server serves a new policy once it has seen it.
	testenv.Eventually(t, time.Minute, func() error {
		return testenv.FinalizerPolicyServes(ctx, env.Client, ns.Name, kustomization.Finalizer)
	})

	child := parentsApply(t, env.Client, ns.Name, "child", "10m")
	if err := wantFinalizers(child, kustomization.Finalizer); err != nil {
		t.Fatalf("a Kustomization applied by its parent: %v", err)
	}
	child = parentsApply(t, env.Client, ns.Name, "child", "20m")
	if err := wantFinalizers(child, kustomization.Finalizer); err != nil {
		t.Fatalf("the Kustomization its parent applied again without the finalizer: %v", err)
	}
	if got, _, _ := unstructured.NestedString(child.Object, "spec", "interval"); got != "20m" {
		t.Fatalf("the parent's second apply was not applied: interval %q", got)
	}

	repo := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "repo", Finalizers: []string{"example.com/keep"}},
		Spec:       sourcev1.GitRepositorySpec{URL: "https://git.example/repo.git", Interval: metav1.Duration{Duration: time.Hour}},
	}
	if err := env.Client.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := wantFinalizers(repo, "example.com/keep", git.Finalizer); err != nil {
		t.Fatalf("a GitRepository created with a finalizer of its own: %v", err)
	}
}

// letGo deletes the Kustomizations and GitRepositories the test created
// in ns, without their finalizers, since no controller here runs to
// remove them.
func letGo(t *testing.T, c client.Client, ns string) {
	ctx := context.Background()
	for _, gvk := range []schema.GroupVersionKind{
		kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind), sourcev1.GroupVersion.WithKind(sourcev1.GitRepositoryKind),
	} {
		kind := gvk.Kind
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Errorf("listing the %ss in %s to delete them: %v", kind, ns, err)
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			patch := client.MergeFrom(o.DeepCopy())
			o.SetFinalizers(nil)
			if err := c.Patch(ctx, o, patch); err != nil {
				t.Errorf("removing the finalizers of %s %s/%s: %v", kind, ns, o.GetName(), err)
			}
			if err := client.IgnoreNotFound(c.Delete(ctx, o)); err != nil {
				t.Errorf("deleting %s %s/%s: %v", kind, ns, o.GetName(), err)
			}
		}
	}
}

// policyObjects are the rendered policy and its binding.
func policyObjects(objects []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objects {
		if o.GetKind() == "MutatingAdmissionPolicy" || o.GetKind() == "MutatingAdmissionPolicyBinding" {
			out = append(out, o)
		}
	}
	return out
}

// parentsApply server-side applies a Kustomization as a parent
// Kustomization would, without finalizers, and returns what is stored.
func parentsApply(t *testing.T, c client.Client, ns, name, interval string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kustomizev1.GroupVersion.String(), "kind": kustomizev1.KustomizationKind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"interval": interval, "prune": true,
			"sourceRef": map[string]any{"kind": sourcev1.GitRepositoryKind, "name": "repo"}},
	}}
	ctx := context.Background()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("parent"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

func wantFinalizers(o client.Object, want ...string) error {
	if got := o.GetFinalizers(); !slices.Equal(got, want) {
		return fmt.Errorf("finalizers %v, want %v", got, want)
	}
	return nil
}
