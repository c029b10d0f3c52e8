// Package bbexample reads the homelab example's Buildbarn
// (clusters/homelab/buildbarn) as typed objects, with its Kustomization's
// substitutions made, for the controller's golden test and the
// end-to-end test.
package bbexample

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Objects are the example's five components, release and images
// substituted for ${buildbarn_release} and ${buildbarn_images}.
func Objects(t testing.TB, release, images string) []bbv1.Component {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "clusters", "homelab", "buildbarn")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != 5 {
		t.Fatalf("want the five components in %s, found %v (%v)", dir, files, err)
	}
	var objs []bbv1.Component
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer("${buildbarn_release}", release, "${buildbarn_images}", images).Replace(string(data))
		obj := newOf(t, f, text)
		if err := yaml.UnmarshalStrict([]byte(text), obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func newOf(t testing.TB, file, text string) bbv1.Component {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		kind, ok := strings.CutPrefix(line, "kind: ")
		if !ok {
			continue
		}
		switch strings.TrimSpace(kind) {
		case "BuildbarnStorage":
			return &bbv1.BuildbarnStorage{}
		case "BuildbarnScheduler":
			return &bbv1.BuildbarnScheduler{}
		case "BuildbarnFrontend":
			return &bbv1.BuildbarnFrontend{}
		case "BuildbarnBrowser":
			return &bbv1.BuildbarnBrowser{}
		case "BuildbarnWorker":
			return &bbv1.BuildbarnWorker{}
		}
	}
	t.Fatalf("%s holds no Buildbarn kind", file)
	return nil
}
