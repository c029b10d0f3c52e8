package plan_test

import (
	"strings"
	"testing"

	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/risk"
)

func runFor(t *testing.T, r *repo, head string, engine risk.Engine) *plan.Plan {
	t.Helper()
	return noErrors(t, planOf(t, r, head, func(o *plan.Options) { o.Engine = engine }))
}

// On a Flux cluster nothing keeps what holds data: a pruned volume and a
// claim moved by a Kustomization's rename destroy data, and no reason
// promises strata's guard. Under strata the guard's outcome shows.
func TestTheEngineDecidesWhatADeletionDoes(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("prune", map[string]string{"storage/pv.yaml": ""})
	r.branch("rename", edit(t, "clusters/homelab/apps.yaml", "name: apps\n", "name: applications\n"))
	for _, tc := range []struct {
		name, head string
		engine     risk.Engine
		object     string
		want       string
		says       string
	}{
		{"pruned volume, flux", "prune", risk.Flux, "PersistentVolume/node-1-nvme1", risk.DestroysData, "Flux deletes it and nothing keeps it: PersistentVolume holds data"},
		{"pruned volume, strata", "prune", risk.Strata, "PersistentVolume/node-1-nvme1", risk.Blocked, "the data-loss guard keeps it"},
		{"renamed Kustomization's claim, flux", "rename", risk.Flux, "PersistentVolumeClaim/databases/db-data", risk.DestroysData,
			"moves from flux-system/apps to flux-system/applications: on Flux, flux-system/apps is deleted, and its deletion prunes it"},
		{"renamed Kustomization's claim, strata", "rename", risk.Strata, "PersistentVolumeClaim/databases/db-data", risk.Safe, "now applied by this Kustomization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := runFor(t, r, tc.head, tc.engine)
			ch, ok := findChange(p, tc.object)
			if !ok {
				t.Fatalf("no change of %s in %s", tc.object, dump(p))
			}
			reasons := strings.Join(ch.Reasons, "\n")
			if ch.Risk != tc.want || !strings.Contains(reasons, tc.says) {
				t.Errorf("%s: %s %q, want %s with %q", tc.object, ch.Risk, ch.Reasons, tc.want, tc.says)
			}
			if tc.engine == risk.Flux && strings.Contains(dump(p), "guard") {
				t.Errorf("a plan for Flux promises strata's guard:\n%s", dump(p))
			}
			if tc.engine == risk.Flux && p.ExitCode("destructive") != plan.ExitDestructive {
				t.Errorf("a plan for Flux that destroys data exits %d under --fail-on destructive", p.ExitCode("destructive"))
			}
		})
	}
}

// Without --engine the plan judges for what the repository shows:
// strata's chart in a HelmRelease, Flux's kustomize-controller, else Flux.
func TestTheEngineIsWhatTheRepositoryShows(t *testing.T) {
	const strataChart = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: strata, namespace: strata-system}
spec:
  interval: 1h
  chart: {spec: {chart: strata, version: 0.1.0, sourceRef: {kind: HelmRepository, name: strata}}}
`
	const fluxComponents = `apiVersion: apps/v1
kind: Deployment
metadata: {name: kustomize-controller, namespace: flux-system}
spec:
  selector: {matchLabels: {app: kustomize-controller}}
  template:
    metadata: {labels: {app: kustomize-controller}}
    spec: {containers: [{name: manager, image: kustomize-controller}]}
`
	r := newRepo(t, fixture())
	r.branch("strata", map[string]string{"infrastructure/strata.yaml": strataChart})
	r.branch("flux", map[string]string{"infrastructure/gotk-components.yaml": fluxComponents})
	for head, want := range map[string]plan.EngineChoice{
		"main":   {Name: risk.Flux, Reason: "neither strata's chart nor Flux's components are in the repository"},
		"strata": {Name: risk.Strata, Reason: "HelmRelease strata-system/strata installs strata's chart"},
		"flux":   {Name: risk.Flux, Reason: "Deployment flux-system/kustomize-controller (Flux's components)"},
	} {
		p := runFor(t, r, head, "")
		if p.Engine.Name != want.Name || !strings.Contains(p.Engine.Reason, want.Reason) {
			t.Errorf("%s: engine %+v, want %s with %q", head, p.Engine, want.Name, want.Reason)
		}
	}
}
