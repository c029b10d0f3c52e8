package plan

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/strata-gitops/strata/plan/charts"
	"github.com/strata-gitops/strata/plan/risk"
	"github.com/strata-gitops/strata/reconciler/guard"
)

// ChartOptions say how HelmReleases' charts are fetched (docs/plan.md,
// "HelmReleases").
type ChartOptions struct {
	// Cache holds charts by digest; "" is ~/.cache/strata/charts.
	Cache string
	// Offline reads only the cache.
	Offline bool
	// Hosts are chart source hosts allowed besides those the base
	// revision's HelmRepositories and OCIRepositories name.
	Hosts []string
	// Off renders no chart: HelmReleases are diffed as objects only.
	Off bool
}

var helmReleaseKind = schema.GroupKind{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"}

// newFetcher is the plan's chart fetcher: the cache, and the hosts the
// base revision's chart sources name (reviewed, merged) or the flag
// allows; a source a pull request adds is not fetched unless allowed.
func newFetcher(o ChartOptions, base *side) (*charts.Fetcher, error) {
	cache := o.Cache
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no cache directory for charts (give --chart-cache): %w", err)
		}
		cache = filepath.Join(dir, "strata", "charts")
	}
	allowed := map[string]bool{}
	for _, h := range o.Hosts {
		allowed[h] = true
	}
	for _, obj := range base.objects.all() {
		gk := obj.GroupVersionKind().GroupKind()
		if gk.Group != "source.toolkit.fluxcd.io" || (gk.Kind != "HelmRepository" && gk.Kind != "OCIRepository") {
			continue
		}
		raw, _, _ := unstructured.NestedString(obj.Object, "spec", "url")
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			allowed[u.Host] = true
		}
	}
	return &charts.Fetcher{Cache: cache, Offline: o.Offline, Allowed: func(h string) bool { return allowed[h] }}, nil
}

// installs is what a HelmRelease installs on one side, or why not.
type installs struct {
	objects []*unstructured.Unstructured
	err     error
}

// helmInstalls renders the HelmRelease hr of side s, once per side.
func (c *comparison) helmInstalls(s *side, hr *unstructured.Unstructured) installs {
	key := fmt.Sprintf("%p/%s", s, keyOf(hr))
	if got, ok := c.rendered[key]; ok {
		return got
	}
	objs, err := c.renderHelmRelease(s, hr)
	got := installs{objs, err}
	c.rendered[key] = got
	return got
}

func (c *comparison) renderHelmRelease(s *side, hr *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if c.fetcher == nil {
		return nil, c.fetcherErr
	}
	src, err := c.chartSource(s, hr)
	if err != nil {
		return nil, err
	}
	ch, _, err := c.fetcher.Fetch(c.ctx, src)
	if err != nil {
		return nil, err
	}
	r, err := releaseOf(c.ctx, s.objects, hr)
	if err != nil {
		return nil, err
	}
	return charts.Render(ch, r)
}

// chartSource finds where hr's chart comes from among the side's objects.
func (c *comparison) chartSource(s *side, hr *unstructured.Unstructured) (charts.Source, error) {
	ns := hr.GetNamespace()
	if ref, ok, _ := unstructured.NestedMap(hr.Object, "spec", "chartRef"); ok {
		kind, name := str(ref, "kind"), str(ref, "name")
		if kind != "OCIRepository" {
			return charts.Source{}, fmt.Errorf("spec.chartRef of kind %s is not rendered (OCIRepository is)", kind)
		}
		repo, err := s.objects.find("source.toolkit.fluxcd.io", kind, or(str(ref, "namespace"), ns), name)
		if err != nil {
			return charts.Source{}, err
		}
		u, _, _ := unstructured.NestedString(repo.Object, "spec", "url")
		tag, _, _ := unstructured.NestedString(repo.Object, "spec", "ref", "tag")
		if tag == "" {
			return charts.Source{}, fmt.Errorf("OCIRepository %s/%s names no spec.ref.tag: only tags are rendered", repo.GetNamespace(), name)
		}
		insecure, _, _ := unstructured.NestedBool(repo.Object, "spec", "insecure")
		return charts.Source{Kind: kind, URL: u, Version: tag, Insecure: insecure}, nil
	}
	spec, _, _ := unstructured.NestedMap(hr.Object, "spec", "chart", "spec")
	chartName, version := str(spec, "chart"), or(str(spec, "version"), "*")
	srcRef, _, _ := unstructured.NestedMap(spec, "sourceRef")
	kind, name := str(srcRef, "kind"), str(srcRef, "name")
	switch kind {
	case "HelmRepository":
		repo, err := s.objects.find("source.toolkit.fluxcd.io", kind, or(str(srcRef, "namespace"), ns), name)
		if err != nil {
			return charts.Source{}, err
		}
		u, _, _ := unstructured.NestedString(repo.Object, "spec", "url")
		typ, _, _ := unstructured.NestedString(repo.Object, "spec", "type")
		insecure, _, _ := unstructured.NestedBool(repo.Object, "spec", "insecure")
		return charts.Source{Kind: kind, URL: u, OCI: typ == "oci", Chart: chartName, Version: version, Insecure: insecure}, nil
	case "GitRepository":
		if name != c.source.Name || or(str(srcRef, "namespace"), ns) != c.source.Namespace {
			return charts.Source{}, fmt.Errorf("the chart's GitRepository %s is not the planned repository", name)
		}
		dir := filepath.Join(s.snap.root, filepath.Clean("/"+chartName))
		return charts.Source{Kind: kind, Dir: dir}, nil
	}
	return charts.Source{}, fmt.Errorf("a chart from a %s is not rendered", kind)
}

// releaseOf is the release helm-controller makes of hr: its name and
// namespace, its values (valuesFrom in order, then spec.values), its CRD
// policy and post-renderers.
func releaseOf(ctx context.Context, objs client.Reader, hr *unstructured.Unstructured) (charts.Release, error) {
	target, _, _ := unstructured.NestedString(hr.Object, "spec", "targetNamespace")
	r := charts.Release{Name: hr.GetName(), Namespace: or(target, hr.GetNamespace()), Values: map[string]any{}}
	if target != "" {
		r.Name = target + "-" + hr.GetName()
	}
	if name, _, _ := unstructured.NestedString(hr.Object, "spec", "releaseName"); name != "" {
		r.Name = name
	}
	from, _, _ := unstructured.NestedSlice(hr.Object, "spec", "valuesFrom")
	for _, item := range from {
		ref, _ := item.(map[string]any)
		if err := mergeValuesFrom(ctx, objs, hr.GetNamespace(), ref, r.Values); err != nil {
			return r, err
		}
	}
	if values, ok, _ := unstructured.NestedMap(hr.Object, "spec", "values"); ok {
		mergeMaps(r.Values, values)
	}
	crds, _, _ := unstructured.NestedString(hr.Object, "spec", "install", "crds")
	r.CRDs = crds != "Skip"
	renderers, _, _ := unstructured.NestedSlice(hr.Object, "spec", "postRenderers")
	for _, pr := range renderers {
		k, ok, _ := unstructured.NestedMap(pr.(map[string]any), "kustomize")
		if !ok {
			continue
		}
		data, _ := json.Marshal(k)
		var kz types.Kustomization
		if err := json.Unmarshal(data, &kz); err != nil {
			return r, fmt.Errorf("spec.postRenderers: %w", err)
		}
		r.PostRenderers = append(r.PostRenderers, kz)
	}
	return r, nil
}

// mergeValuesFrom merges one valuesFrom reference into values.
func mergeValuesFrom(ctx context.Context, objs client.Reader, ns string, ref map[string]any, values map[string]any) error {
	kind, name, key := str(ref, "kind"), str(ref, "name"), or(str(ref, "valuesKey"), "values.yaml")
	optional, _ := ref["optional"].(bool)
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind(kind)
	if err := objs.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if optional {
			return nil
		}
		return fmt.Errorf("valuesFrom %s %s/%s: %w (supply it with --substitute-from)", kind, ns, name, err)
	}
	raw, found := dataOf(obj, key)
	if !found {
		if optional {
			return nil
		}
		return fmt.Errorf("valuesFrom %s %s/%s has no key %s", kind, ns, name, key)
	}
	if path := str(ref, "targetPath"); path != "" {
		return strvals.ParseInto(path+"="+raw, values)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(raw), &m); err != nil {
		return fmt.Errorf("valuesFrom %s %s/%s key %s: %w", kind, ns, name, key, err)
	}
	mergeMaps(values, m)
	return nil
}

// dataOf reads a key of a ConfigMap or Secret.
func dataOf(obj *unstructured.Unstructured, key string) (string, bool) {
	if v, ok, _ := unstructured.NestedString(obj.Object, "stringData", key); ok {
		return v, true
	}
	v, ok, _ := unstructured.NestedString(obj.Object, "data", key)
	if ok && obj.GetKind() == "Secret" {
		dec, err := base64.StdEncoding.DecodeString(v)
		return string(dec), err == nil
	}
	return v, ok
}

// mergeMaps merges src into dst, src winning, maps merged deeply.
func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeMaps(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// helmChange judges what a HelmRelease's change installs: the chart
// rendered on both sides, every object it creates, changes or deletes
// listed under the HelmRelease's change (Installs), whose risk becomes
// the worst of them. A HelmRelease whose chart cannot be rendered keeps
// its object diff and says why.
func (c *comparison) helmChange(ch *Change, b, h *unstructured.Unstructured) {
	if c.charts.Off {
		return
	}
	var before, after installs
	if b != nil {
		before = c.helmInstalls(c.base, b)
	}
	if h != nil {
		after = c.helmInstalls(c.head, h)
	}
	failed := false
	for _, err := range []error{before.err, after.err} {
		if err != nil {
			failed = true
			reason := "its chart was not rendered: " + err.Error()
			ch.Reasons = append(ch.Reasons, reason)
			c.plan.Warnings = append(c.plan.Warnings, fmt.Sprintf("HelmRelease %s/%s: %s", refName(b, h)[0], refName(b, h)[1], reason))
		}
	}
	if !failed {
		c.compareInstalls(ch, before.objects, after.objects)
	}
}

func refName(b, h *unstructured.Unstructured) [2]string {
	if h != nil {
		return [2]string{h.GetNamespace(), h.GetName()}
	}
	return [2]string{b.GetNamespace(), b.GetName()}
}

// compareInstalls lists what the chart's objects do between the sides.
func (c *comparison) compareInstalls(ch *Change, before, after []*unstructured.Unstructured) {
	was := map[objKey]*unstructured.Unstructured{}
	for _, o := range before {
		was[keyOf(o)] = o
	}
	is := map[objKey]bool{}
	beforeObjs := newRepoObjects()
	beforeObjs.add(before)
	afterObjs := newRepoObjects()
	afterObjs.add(after)
	for _, h := range after {
		is[keyOf(h)] = true
		b := was[keyOf(h)]
		switch {
		case b == nil:
			ch.Installs = append(ch.Installs, Change{Action: Created, Object: refOf(h), Risk: risk.Safe, Diff: c.diff(nil, h)})
		case !reflect.DeepEqual(b.Object, h.Object):
			sub := Change{Action: Changed, Object: refOf(h), Diff: c.diff(b, h)}
			// helm upgrade patches in place: an immutable field fails
			// the upgrade; Flux's helm-controller keeps nothing.
			sub.Risk, sub.Reasons = risk.Classify(c.ctx, risk.Flux, beforeObjs, afterObjs, (*kustomizev1.Kustomization)(nil), b, h)
			ch.Installs = append(ch.Installs, sub)
		}
	}
	for _, b := range before {
		if is[keyOf(b)] {
			continue
		}
		ch.Installs = append(ch.Installs, c.uninstalled(beforeObjs, b))
	}
	for _, sub := range ch.Installs {
		if sub.Risk != risk.Safe {
			ch.Risk, ch.Reasons = risk.Raise(ch.Risk, ch.Reasons, sub.Risk, fmt.Sprintf("the chart %s %s: %s", sub.Action, sub.Object, strings.Join(sub.Reasons, "; ")))
		}
	}
}

// uninstalled judges an object the chart no longer renders: helm deletes
// it, unless it carries helm.sh/resource-policy: keep.
func (c *comparison) uninstalled(objs *repoObjects, b *unstructured.Unstructured) Change {
	ch := Change{Action: Deleted, Object: refOf(b), Risk: risk.Safe, Diff: c.diff(b, nil)}
	if b.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
		ch.Action, ch.Reasons = Orphaned, []string{"the chart no longer renders it; helm.sh/resource-policy: keep leaves it in the cluster"}
		return ch
	}
	reason, err := guard.Reason(c.ctx, objs, b)
	switch {
	case err != nil:
		ch.Risk, ch.Reasons = risk.DestroysData, []string{"the chart no longer renders it, so helm deletes it; whether it holds data could not be read: " + err.Error()}
	case reason != "":
		ch.Risk, ch.Reasons = risk.DestroysData, []string{"the chart no longer renders it, so helm deletes it and nothing keeps it: " + reason}
	default:
		ch.Reasons = []string{"the chart no longer renders it, so helm deletes it"}
	}
	return ch
}

// valuesInputsDiffer says whether a HelmRelease the same on both sides
// reads other values: a ConfigMap or Secret of its valuesFrom changed.
func (c *comparison) valuesInputsDiffer(b, h *unstructured.Unstructured) bool {
	from, _, _ := unstructured.NestedSlice(h.Object, "spec", "valuesFrom")
	for _, item := range from {
		ref, _ := item.(map[string]any)
		key := objKey{Kind: str(ref, "kind"), Namespace: h.GetNamespace(), Name: str(ref, "name")}
		bo, ho := c.base.objects.byKey[key], c.head.objects.byKey[key]
		if (bo == nil) != (ho == nil) || bo != nil && !reflect.DeepEqual(bo.Object, ho.Object) {
			return true
		}
	}
	return false
}
