package plan_test

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// TestExampleRepository plans the example repository the README points
// to, laid out as its GitRepository serves it: everything renders, its
// OCIRepository's and Bucket's Kustomizations from the directories strata
// up ships them from (--source-dir), with the addresses strata up writes
// (--substitute-from).
func TestExampleRepository(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "clusters", "homelab")
	files, err := testenv.ReadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t, files)
	addrs := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "homelab-sources", "namespace": "flux-system"},
		"data":     map[string]any{"registry": "10.0.0.1:5000", "bucket_endpoint": "10.0.0.1:9000"}}}
	shipped := filepath.Join(testenv.RepoRoot(), "clusters", "homelab-sources")
	p, err := plan.Run(context.Background(), plan.Options{RepoDir: r.dir, Base: "main", Head: "main", Path: "./cluster",
		SourceRoot: ".", Source: graph.Key{Namespace: "flux-system", Name: "flux-system"},
		SubstituteFrom: []*unstructured.Unstructured{addrs},
		SourceDirs: map[string]string{"OCIRepository/flux-system/homelab-settings": filepath.Join(shipped, "oci"),
			"Bucket/flux-system/homelab-settings": filepath.Join(shipped, "bucket")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) > 0 || len(p.Kustomizations) < 3 {
		t.Fatalf("the example repository does not plan cleanly: %s", dump(p))
	}
	for _, ks := range p.Kustomizations {
		if ks.Status != "unchanged" {
			t.Errorf("%s/%s: %s %s", ks.Namespace, ks.Name, ks.Status, ks.Reason)
		}
	}
}
