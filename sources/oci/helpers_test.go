package oci_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type metaRef = meta.LocalObjectReference

func ptr[T any](v T) *T { return &v }

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func findCondition(obj *sourcev1.OCIRepository, kind string) *metav1.Condition {
	return apimeta.FindStatusCondition(obj.Status.Conditions, kind)
}

func requestReconcile(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	obj.SetAnnotations(ann)
	if err := c.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
}
