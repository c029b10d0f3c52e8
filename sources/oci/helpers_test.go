package oci_test

import (
	"slices"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
