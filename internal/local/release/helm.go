package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/storage/driver"
	"helm.sh/helm/v3/pkg/strvals"
)

// releaseName is the Helm release strata is installed as.
const releaseName = "strata"

// helm installs the release's chart with Helm's own SDK, the library
// the helm CLI runs, so that `make up` has no helm program to build: it
// does what `helm upgrade --install strata oci://REGISTRY/charts/strata
// --version V --plain-http --namespace NS --create-namespace --set ...`
// does, and keeps its releases where the CLI keeps them (Secrets), so
// the CLI lists and upgrades them too.
type helm struct {
	cfg   *action.Configuration
	chart *chart.Chart
}

// pullChart reads the release's chart from the registry.
func pullChart(o Options) (*helm, error) {
	settings := cli.New()
	settings.KubeConfig = o.Kubeconfig
	settings.SetNamespace(o.Namespace)
	cfg := &action.Configuration{}
	if err := cfg.Init(settings.RESTClientGetter(), o.Namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm's SDK with %s: %w", o.Kubeconfig, err)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		return nil, err
	}
	cfg.RegistryClient = rc
	ref := strings.TrimPrefix(chartRef(o), "oci://") + ":" + o.Release.Version
	pulled, err := rc.Pull(ref, registry.PullOptWithChart(true))
	if err != nil {
		return nil, fmt.Errorf("pulling the chart %s: %w", ref, err)
	}
	c, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		return nil, fmt.Errorf("the chart %s: %w", ref, err)
	}
	return &helm{cfg: cfg, chart: c}, nil
}

// crds are the chart's CRDs as one YAML stream, as `helm show crds`
// prints them.
func (h *helm) crds() []byte {
	var out bytes.Buffer
	for _, crd := range h.chart.CRDObjects() {
		out.WriteString("---\n")
		out.Write(crd.File.Data)
		out.WriteString("\n")
	}
	return out.Bytes()
}

// upgradeInstall installs the chart with the values, or upgrades the
// release to it, as `helm upgrade --install` does.
func (h *helm) upgradeInstall(ctx context.Context, o Options, set []string) error {
	values := map[string]any{}
	for _, s := range set {
		if err := strvals.ParseInto(s, values); err != nil {
			return fmt.Errorf("chart value %q: %w", s, err)
		}
	}
	history := action.NewHistory(h.cfg)
	history.Max = 1
	_, err := history.Run(releaseName)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		install := action.NewInstall(h.cfg)
		install.ReleaseName, install.Namespace, install.CreateNamespace = releaseName, o.Namespace, true
		_, err = install.RunWithContext(ctx, h.chart, values)
	case err == nil:
		upgrade := action.NewUpgrade(h.cfg)
		upgrade.Namespace = o.Namespace
		_, err = upgrade.RunWithContext(ctx, releaseName, h.chart, values)
	}
	if err != nil {
		return fmt.Errorf("helm upgrade --install %s %s --version %s: %w", releaseName, chartRef(o), o.Release.Version, err)
	}
	return nil
}
