package main

import (
	"fmt"
	"strings"
)

// layouts write the Flux side of the repository (the Kustomizations that
// apply apps/<name>, keyed by file name) and say what the apps'
// kustomization files add to their resources.
var layouts = map[string]func(n int) (files map[string]string, appComponents string){"flat": flatLayout, "homelab": homelabLayout}

// flatLayout puts every Kustomization in clusters/bench, the path planned.
func flatLayout(n int) (map[string]string, string) {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("clusters/bench/%s.yaml", app(i))] = kustomization(i)
	}
	return files, ""
}

// homelabLayout is the shape of many public homelab repositories: one
// parent Kustomization (cluster-apps) applies a directory of app
// Kustomizations and patches every one of them, here with a substitution
// the apps' shared component uses.
func homelabLayout(n int) (map[string]string, string) {
	files := commonComponent()
	var resources strings.Builder
	for i := range n {
		files[fmt.Sprintf("clusters/apps/%s.yaml", app(i))] = kustomization(i) + "  postBuild:\n    substitute:\n      APP: " + app(i) + "\n"
		fmt.Fprintf(&resources, "  - %s.yaml\n", app(i))
	}
	files["clusters/apps/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n" + resources.String()
	files["clusters/bench/cluster-apps.yaml"] = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: cluster-apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./clusters/apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
  patches:
    - target:
        kind: Kustomization
        group: kustomize.toolkit.fluxcd.io
      patch: |
        apiVersion: kustomize.toolkit.fluxcd.io/v1
        kind: Kustomization
        metadata:
          name: not-used
        spec:
          postBuild:
            substitute:
              CLUSTER: bench
`
	return files, "components:\n  - ../../components/common\n"
}

// commonComponent is the kustomize component every app includes: a
// ConfigMap in the app's namespace naming the cluster, with a default.
func commonComponent() map[string]string {
	return map[string]string{
		"components/common/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n  - common.yaml\n",
		"components/common/common.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: common
  namespace: ${APP}
data:
  cluster: ${CLUSTER:=none}
`,
	}
}
