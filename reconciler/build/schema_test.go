package build_test

import (
	"context"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"

	"github.com/strata-gitops/strata/reconciler/build"
)

// Only the kustomization files a render reads, parsed, decide whether it
// loads a schema of its own (and so runs alone); a render whose inputs
// cannot be followed, such as a remote base, runs alone too.
func TestOnlyWhatARenderReadsDecidesItsSchema(t *testing.T) {
	withSchema := writeTree(t, map[string]string{
		"apps/plain/app.yaml":                      "kind: ConfigMap\n",
		"apps/own/kustomization.yaml":              "openapi:\n  path: schema.json\nresources:\n- app.yaml\n",
		"apps/own/schema.json":                     `{"definitions": {}}`,
		"apps/own/app.yaml":                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\n",
		"apps/uses/kustomization.yaml":             "resources:\n- ../own\n",
		"apps/generated/sub/kustomization.yaml":    "openapi:\n  path: schema.json\n",
		"apps/comment/kustomization.yaml":          "# openapi: only in a comment\nresources:\n- app.yaml\n",
		"apps/comment/app.yaml":                    "kind: ConfigMap\n",
		"apps/plaincomment/sub/kustomization.yaml": "# openapi: only in a comment\n",
		"apps/remote/kustomization.yaml":           "resources:\n- https://github.com/example/repo//deploy?ref=v1\n",
		"apps/component/kustomization.yaml":        "resources:\n- app.yaml\n",
		"apps/component/app.yaml":                  "kind: ConfigMap\n",
		"components/schema/kustomization.yaml":     "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nopenapi:\n  path: s.json\n",
		"components/schema/s.json":                 `{"definitions": {}}`,
		"components/noschema/kustomization.yaml":   "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
	})
	for _, c := range []struct {
		root, path string
		components []string
		want       bool
	}{
		{withSchema, "apps/plain", nil, false},
		{withSchema, "apps/own", nil, true},
		{withSchema, "apps/uses", nil, true},
		{withSchema, "apps/generated", nil, true},
		{withSchema, "apps/comment", nil, false},
		{withSchema, "apps/plaincomment", nil, false},
		{withSchema, "apps/remote", nil, true},
		{withSchema, "apps/component", []string{"../../components/noschema"}, false},
		{withSchema, "apps/component", []string{"../../components/schema"}, true},
	} {
		ks := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Path: c.path, Components: c.components}}
		if got := build.LoadsOwnSchema(ks, c.root); got != c.want {
			t.Errorf("loadsOwnSchema(%s, components %v) = %v, want %v", c.path, c.components, got, c.want)
		}
	}
	ks := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Path: "apps/own"}}
	rendered, err := build.Render(context.Background(), withSchema, ks, nil)
	if err != nil || len(rendered.Objects) != 1 || rendered.Objects[0].GetName() != "own" {
		t.Fatalf("rendering with its own schema: %v, %v", err, rendered)
	}
}
