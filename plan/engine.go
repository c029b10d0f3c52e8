package plan

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/graph"
)

// chooseEngine is the engine given, or the one the head revision shows:
// strata's chart installed by a HelmRelease, or Flux's own controllers
// (gotk-components); else Flux, which keeps nothing, so that the plan
// never promises a guard the cluster may not have.
func chooseEngine(given risk.Engine, head *side) EngineChoice {
	if given != "" {
		return EngineChoice{Name: given, Reason: "--engine " + string(given)}
	}
	// In the Kustomizations' order, so that one repository gives one answer.
	keys := make([]graph.Key, 0, len(head.renders))
	for k, r := range head.renders {
		if r.err == nil {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var objs []*unstructured.Unstructured
	for _, k := range keys {
		objs = append(objs, head.renders[k].objects...)
	}
	for _, o := range objs {
		if installsStrata(o) {
			return EngineChoice{Name: risk.Strata, Reason: fmt.Sprintf("HelmRelease %s/%s installs strata's chart", o.GetNamespace(), o.GetName())}
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "kustomize-controller" {
			return EngineChoice{Name: risk.Flux, Reason: fmt.Sprintf("Deployment %s/kustomize-controller (Flux's components) applies the repository", o.GetNamespace())}
		}
	}
	return EngineChoice{Name: risk.Flux, Reason: "neither strata's chart nor Flux's components are in the repository; judged as Flux, which keeps nothing it prunes (give --engine strata if strata applies it)"}
}

// installsStrata says whether o is a HelmRelease of strata's chart.
func installsStrata(o *unstructured.Unstructured) bool {
	if o.GroupVersionKind().Group != "helm.toolkit.fluxcd.io" || o.GetKind() != "HelmRelease" {
		return false
	}
	chart, _, _ := unstructured.NestedString(o.Object, "spec", "chart", "spec", "chart")
	ref, _, _ := unstructured.NestedString(o.Object, "spec", "chartRef", "name")
	return chart == "strata" || ref == "strata"
}
