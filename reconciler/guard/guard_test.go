package guard

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func object(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// cluster is an in-memory reader holding objs; kinds it is not told of
// are listed as empty.
func cluster(t *testing.T, objs ...*unstructured.Unstructured) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	for _, gvk := range append(namespaced, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}) {
		s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		s.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for _, o := range objs {
		b = b.WithObjects(o)
	}
	return b.Build()
}

func TestReason(t *testing.T) {
	ctx := context.Background()
	owned := object("v1", "PersistentVolumeClaim", "apps", "data-db-0", nil)
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Database", Name: "db", UID: "uid-db"}})
	c := cluster(t,
		object("snapshot.storage.k8s.io/v1", "VolumeSnapshot", "snaps-only", "nightly", nil),
		object("storage.strata.dev/v1alpha1", "LVMCluster", "storage", "local", nil),
		object("buildbarn.strata.dev/v1alpha1", "BuildbarnStorage", "buildbarn", "storage", nil),
		owned,
	)
	db := object("example.com/v1", "Database", "apps", "db", nil)
	db.SetUID("uid-db")
	other := object("example.com/v1", "Database", "apps", "db", nil)
	other.SetUID("uid-of-a-new-db")
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string // empty: safe
	}{
		{"a claim", object("v1", "PersistentVolumeClaim", "apps", "x", nil), "PersistentVolumeClaim holds data"},
		{"a namespace with only snapshots", object("v1", "Namespace", "", "snaps-only", nil), "VolumeSnapshots (e.g. nightly)"},
		{"a namespace with an LVMCluster", object("v1", "Namespace", "", "storage", nil), "LVMClusters (e.g. local)"},
		{"a Buildbarn storage", object("buildbarn.strata.dev/v1alpha1", "BuildbarnStorage", "buildbarn", "storage", nil), "hold the build cache"},
		{"a namespace with a Buildbarn storage", object("v1", "Namespace", "", "buildbarn", nil), "BuildbarnStorages (e.g. storage)"},
		{"a Buildbarn frontend", object("buildbarn.strata.dev/v1alpha1", "BuildbarnFrontend", "buildbarn", "frontend", nil), ""},
		{"an empty namespace", object("v1", "Namespace", "", "empty", nil), ""},
		{"a StatefulSet that deletes its claims", object("apps/v1", "StatefulSet", "apps", "web", map[string]any{
			"spec": map[string]any{"persistentVolumeClaimRetentionPolicy": map[string]any{"whenDeleted": "Delete"}}}), "whenDeleted: Delete"},
		{"a StatefulSet that retains its claims", object("apps/v1", "StatefulSet", "apps", "web", map[string]any{
			"spec": map[string]any{"persistentVolumeClaimRetentionPolicy": map[string]any{"whenDeleted": "Retain"}}}), ""},
		{"the owner of a claim", db, "owns PersistentVolumeClaim data-db-0"},
		{"an object of the owner's name but not the owner", other, ""},
		{"a ConfigMap", object("v1", "ConfigMap", "apps", "settings", nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Reason(ctx, c, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Reason = %q, want %q", got, tc.want)
			}
		})
	}
}

// A blocked deletion names the object and the opt-in; the opt-in on the
// object or its owner lets it through.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	c := cluster(t)
	pvc := object("v1", "PersistentVolumeClaim", "apps", "data", nil)
	err := Check(ctx, c, pvc, nil)
	var blocked *Blocked
	if !errors.As(err, &blocked) || !strings.Contains(err.Error(), "PersistentVolumeClaim/apps/data") || !strings.Contains(err.Error(), OptInAnnotation) {
		t.Fatalf("Check = %v, want a Blocked error naming the claim and the opt-in", err)
	}
	ks := object("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "apps", nil)
	ks.SetAnnotations(map[string]string{OptInAnnotation: "true"})
	if err := Check(ctx, c, pvc, ks); err != nil {
		t.Fatalf("Check with the opt-in on the owner = %v", err)
	}
}
