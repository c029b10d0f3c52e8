package build_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"

	"github.com/strata-gitops/strata/reconciler/build"
)

// BenchmarkRender renders one directory of four objects without a
// kustomization file, among a thousand such directories, with a
// substitution: the bench's app, as a push re-renders it.
func BenchmarkRender(b *testing.B) {
	root := b.TempDir()
	for i := range 1000 {
		dir := filepath.Join(root, fmt.Sprintf("app-%04d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		manifest := `apiVersion: v1
kind: ServiceAccount
metadata: {name: app}
---
apiVersion: v1
kind: Service
metadata: {name: app}
spec: {selector: {app: app}, ports: [{port: 80}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app}
data: {id: "${ID}"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  replicas: 0
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec: {containers: [{name: app, image: "nginx:1.27"}]}
`
		if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(manifest), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ks := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Path: "./app-0500",
		PostBuild: &kustomizev1.PostBuild{Substitute: map[string]string{"ID": "500"}}}}
	ks.Name, ks.Namespace = "app", "bench"
	b.ResetTimer()
	for range b.N {
		if _, err := build.Render(context.Background(), root, ks, nil); err != nil {
			b.Fatal(err)
		}
	}
}
