package plan_test

import (
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/plan"
)

// A Kustomization built from an OCIRepository is listed as not rendered,
// naming --source-dir; given its artifact's files with --source-dir, it
// renders from them: a Kustomization the head adds shows every object it
// will create, and one whose path moves shows what moves.
func TestSourceDirRendersOtherSources(t *testing.T) {
	r := newRepo(t, fixture())
	addOCI := map[string]string{"clusters/homelab/settings.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: settings
  namespace: flux-system
spec:
  interval: 10m
  path: ./prod
  prune: true
  targetNamespace: apps
  sourceRef:
    kind: OCIRepository
    name: settings
`}
	r.branch("oci", addOCI)
	p := noErrors(t, planOf(t, r, "oci", nil))
	ks := kustomizationNamed(t, p, "settings")
	if ks.Status != "not-rendered" || !strings.Contains(ks.Reason, "--source-dir OCIRepository/flux-system/settings=DIR") {
		t.Fatalf("without --source-dir: %s %q; want not-rendered naming the flag", ks.Status, ks.Reason)
	}
	dir := t.TempDir()
	if err := testenv.WriteTree(dir, map[string]string{
		"prod/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-artifact\ndata:\n  a: b\n",
	}); err != nil {
		t.Fatal(err)
	}
	p = noErrors(t, planOf(t, r, "oci", func(o *plan.Options) {
		o.SourceDirs = map[string]string{"OCIRepository/flux-system/settings": dir}
	}))
	checkWants(t, p, []want{{object: "ConfigMap/apps/from-artifact", action: "created", risk: "safe"}})
}

func kustomizationNamed(t *testing.T, p *plan.Plan, name string) plan.Kustomization {
	t.Helper()
	for _, ks := range p.Kustomizations {
		if ks.Name == name {
			return ks
		}
	}
	t.Fatalf("no Kustomization %s in %s", name, dump(p))
	return plan.Kustomization{}
}
