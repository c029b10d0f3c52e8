package charts

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/yaml"
)

// Release is what helm-controller installs a chart as.
type Release struct {
	Name, Namespace string
	Values          map[string]any
	// CRDs: the chart's crds/ are installed (spec.install.crds is not
	// Skip).
	CRDs bool
	// PostRenderers are spec.postRenderers' kustomize sections.
	PostRenderers []types.Kustomization
}

// clusterScoped are the kinds a chart commonly holds that have no
// namespace; every other object without one lands in the release's.
var clusterScoped = map[string]bool{
	"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true,
	"StorageClass": true, "PersistentVolume": true, "PriorityClass": true, "ValidatingWebhookConfiguration": true,
	"MutatingWebhookConfiguration": true, "CSIDriver": true, "APIService": true, "IngressClass": true,
	"VolumeSnapshotClass": true, "RuntimeClass": true,
}

// Render renders the chart as the release: its objects, hooks left out
// (helm-controller runs them, they are not the release's), post-renderers
// applied, each namespaced object in the release's namespace unless it
// names its own.
func Render(ch *chart.Chart, r Release) ([]*unstructured.Unstructured, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	vals, err := chartutil.ToRenderValues(ch, r.Values, chartutil.ReleaseOptions{Name: r.Name, Namespace: r.Namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("chart %s's values: %w", ch.Name(), err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	_, manifestsOf, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	var out bytes.Buffer
	if r.CRDs {
		for _, crd := range ch.CRDObjects() {
			out.Write(crd.File.Data)
			out.WriteString("\n---\n")
		}
	}
	for _, m := range manifestsOf {
		out.WriteString(m.Content)
		out.WriteString("\n---\n")
	}
	data := out.Bytes()
	for i, k := range r.PostRenderers {
		if data, err = postRender(data, k); err != nil {
			return nil, fmt.Errorf("post-renderer %d: %w", i+1, err)
		}
	}
	objs, err := ssautils.ReadObjects(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("chart %s's manifests: %w", ch.Name(), err)
	}
	for _, o := range objs {
		if o.GetNamespace() == "" && !clusterScoped[o.GetKind()] {
			o.SetNamespace(r.Namespace)
		}
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].GetKind()+objs[i].GetName() < objs[j].GetKind()+objs[j].GetName() })
	return objs, nil
}

// postRender applies a kustomize post-renderer (patches, images) to the
// rendered manifests, as helm-controller does.
func postRender(in []byte, k types.Kustomization) ([]byte, error) {
	fs := filesys.MakeFsInMemory()
	k.Resources = []string{"release.yaml"}
	k.APIVersion, k.Kind = types.KustomizationVersion, types.KustomizationKind
	kdata, err := kyaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := fs.WriteFile("/release/release.yaml", in); err != nil {
		return nil, err
	}
	if err := fs.WriteFile("/release/kustomization.yaml", kdata); err != nil {
		return nil, err
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/release")
	if err != nil {
		return nil, err
	}
	return rm.AsYaml()
}
