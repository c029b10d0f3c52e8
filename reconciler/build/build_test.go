package build_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-gitops/strata/reconciler/build"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
`

func byKind(objects []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objects {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

func TestRenderAppliesFluxBuildOptions(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/deploy.yaml": deployment,
		"app/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  cluster: ${cluster}\n",
		"components/extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
			"resources:\n- sa.yaml\n",
		"components/extra/sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: extra\n",
	})
	ks := &kustomizev1.Kustomization{}
	ks.Name, ks.Namespace = "app", "flux-system"
	ks.Spec = kustomizev1.KustomizationSpec{
		Path:            "./app",
		TargetNamespace: "prod",
		NamePrefix:      "pre-",
		NameSuffix:      "-suf",
		Components:      []string{"../components/extra"},
		Images:          []kustomize.Image{{Name: "nginx", NewTag: "1.27"}},
		Patches: []kustomize.Patch{{
			Patch:  `[{"op": "add", "path": "/spec/replicas", "value": 3}]`,
			Target: &kustomize.Selector{Kind: "Deployment"},
		}},
		PostBuild: &kustomizev1.PostBuild{Substitute: map[string]string{"cluster": "homelab"}},
	}
	rendered, err := build.Render(context.Background(), root, ks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rendered.SelfContained {
		t.Error("a render that read a component outside its path says it read only its path")
	}
	objects := rendered.Objects
	d := byKind(objects, "Deployment")
	if d == nil || d.GetName() != "pre-web-suf" || d.GetNamespace() != "prod" {
		t.Fatalf("deployment name/namespace wrong: %v", d)
	}
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if replicas != 3 || containers[0].(map[string]any)["image"] != "nginx:1.27" {
		t.Errorf("patch or image not applied: replicas %d, containers %v", replicas, containers)
	}
	if sa := byKind(objects, "ServiceAccount"); sa == nil || sa.GetName() != "pre-extra-suf" {
		t.Errorf("component not included: %v", sa)
	}
	cm := byKind(objects, "ConfigMap")
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "cluster"); v != "homelab" {
		t.Errorf("substitution not applied: %q", v)
	}
}

func TestRenderNeverWritesToTheSource(t *testing.T) {
	root := writeTree(t, map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"})
	ks := &kustomizev1.Kustomization{}
	ks.Spec.Path = "app"
	ks.Spec.TargetNamespace = "x"
	rendered, err := build.Render(context.Background(), root, ks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rendered.SelfContained {
		t.Error("a render of one plain directory says it read more than its path")
	}
	entries, _ := os.ReadDir(filepath.Join(root, "app"))
	if len(entries) != 1 {
		t.Errorf("render wrote into the shared source tree: %v", entries)
	}
}

func TestRenderErrorsNameThePath(t *testing.T) {
	root := writeTree(t, map[string]string{"app/bad.yaml": "kind: [\n"})
	for path, want := range map[string]string{"./missing": "path './missing' not found", "./app": "bad.yaml"} {
		ks := &kustomizev1.Kustomization{}
		ks.Spec.Path = path
		_, err := build.Render(context.Background(), root, ks, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Render(%s) error = %v, want it to mention %q", path, err, want)
		}
	}
	ks := &kustomizev1.Kustomization{}
	ks.Spec.Path = "../../etc"
	if _, err := build.Render(context.Background(), root, ks, nil); err == nil {
		t.Error("a path outside the source root was rendered")
	}
}

// TestParallelRendersShareOneTree renders many Kustomizations of one tree
// at once, as the controller does; run with -race to check kustomize's
// shared state.
func TestParallelRendersShareOneTree(t *testing.T) {
	files := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		files[n+"/deploy.yaml"] = deployment
	}
	root := writeTree(t, files)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ks := &kustomizev1.Kustomization{}
			ks.Spec.Path = string(rune('a' + i%8))
			ks.Spec.TargetNamespace = "ns"
			rendered, err := build.Render(context.Background(), root, ks, nil)
			if err == nil && len(rendered.Objects) != 1 {
				err = os.ErrInvalid
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A kustomization file is parsed, not searched: a schema comment's URL is
// no remote base, while a parent reference in a directory it uses is.
func TestReadsOnlyItsPath(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	schema := "# yaml-language-server: $schema=https://json.schemastore.org/kustomization\n"
	write("apps/local/kustomization.yaml", schema+"resources:\n- app.yaml\n- sub\nconfigMapGenerator:\n- name: c\n  files:\n  - cfg=conf/a.conf\n")
	write("apps/local/sub/kustomization.yaml", schema+"resources:\n- b.yaml\n")
	write("apps/parent/kustomization.yaml", "resources:\n- sub\n")
	write("apps/parent/sub/kustomization.yaml", "resources:\n- ../../../shared\n")
	write("apps/remote/kustomization.yaml", "resources:\n- https://github.com/example/repo//deploy?ref=v1\n")
	write("apps/gitssh/kustomization.yaml", "resources:\n- git@github.com:example/repo.git\n")
	write("apps/plain/app.yaml", "kind: ConfigMap\n")
	write("apps/broken/kustomization.yaml", "resources: [unclosed\n")
	// A directory without a kustomization file: Flux's generator builds each
	// subdirectory that has one, with whatever that one references.
	write("apps/cluster/local/kustomization.yaml", "resources:\n- app.yaml\n")
	write("apps/cluster/local/app.yaml", "kind: ConfigMap\n")
	write("apps/outside/app.yaml", "kind: ConfigMap\n")
	write("apps/outside/overlay/kustomization.yaml", "resources:\n- ../../../shared\n")
	write("apps/deep/a/b/kustomization.yaml", "resources:\n- https://github.com/example/repo//deploy?ref=v1\n")
	for path, want := range map[string]bool{
		"./apps/local": true, "./apps/plain": true, "./apps/cluster": true,
		"./apps/parent": false, "./apps/remote": false, "./apps/gitssh": false, "./apps/broken": false,
		"./apps/outside": false, "./apps/deep": false,
	} {
		ks := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Path: path}}
		if got := build.ReadsOnlyItsPath(ks, root); got != want {
			t.Errorf("ReadsOnlyItsPath(%s) = %v, want %v", path, got, want)
		}
	}
	// strata plan --changed-only renders a Kustomization when a file it
	// reads changed, the base of a subdirectory's kustomization included.
	ks := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Path: "./apps/outside"}}
	if paths, ok := build.PathsRead(ks, root); !ok || !slices.Contains(paths, "shared") {
		t.Errorf("PathsRead(./apps/outside) = %v, %v; want shared among them", paths, ok)
	}
}
