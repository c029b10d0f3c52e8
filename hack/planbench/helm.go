package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/strata-gitops/strata/internal/testing/benchstat"
)

// chartsInRepo is how many distinct charts the HelmReleases use; each
// chart serves helmReleases/chartsInRepo releases.
const chartsInRepo = 20

// runHelm measures strata plan on a repository of HelmReleases whose
// charts come from an HTTP chart repository on loopback: with a cold
// chart cache (a new one each run) and a warm one, beside a loop of
// `helm template` over the same releases from local chart files, in one
// run.
func runHelm(c config, helm string) error {
	dir, err := os.MkdirTemp("", "planbench-helm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	charts := filepath.Join(dir, "charts")
	srv := httptest.NewServer(http.FileServer(http.Dir(charts)))
	defer srv.Close()
	if err := writeCharts(charts, srv.URL); err != nil {
		return err
	}
	repoDir := filepath.Join(dir, "repo")
	if err := generateHelm(repoDir, srv.URL, c); err != nil {
		return err
	}
	fmt.Printf("planbench: %d HelmReleases of %d charts from an HTTP chart repository on loopback, %d bumped, median of %d runs\n",
		c.helmReleases, chartsInRepo, c.changed, c.runs)
	args := []string{"plan", "--repo", repoDir, "--base", "main", "--head", "head", "--path", "./clusters/bench", "--format", "json", "--fail-on", "never"}
	var cold []time.Duration
	for range c.runs {
		cache, err := os.MkdirTemp(dir, "cache-")
		if err != nil {
			return err
		}
		one := c
		one.runs = 1
		t, p, err := timePlan(one, append(args, "--chart-cache", cache))
		if err != nil {
			return err
		}
		if len(p.Warnings) > 0 {
			return fmt.Errorf("plan warnings: %v", p.Warnings)
		}
		cold = append(cold, t)
	}
	warmCache := filepath.Join(dir, "warm")
	if _, _, err := timePlan(config{runs: 1, strata: c.strata}, append(args, "--chart-cache", warmCache)); err != nil {
		return err
	}
	warm, p, err := timePlan(c, append(args, "--chart-cache", warmCache, "--offline"))
	if err != nil {
		return err
	}
	installs := 0
	for _, ks := range p.Kustomizations {
		for _, ch := range ks.Changes {
			installs += len(ch.Installs)
		}
	}
	helmLoop, err := timeHelmTemplate(c, helm, charts)
	if err != nil {
		return err
	}
	fmt.Printf("plan: %d HelmReleases changed, %d objects they install change\n", p.Summary.Changed, installs)
	fmt.Printf("strata plan, cold chart cache:          %6.2f s\n", benchstat.Percentile(cold, 50).Seconds())
	fmt.Printf("strata plan, warm chart cache:          %6.2f s\n", warm.Seconds())
	fmt.Printf("helm template x %d (one revision):      %6.2f s\n", c.changed, helmLoop.Seconds())
	return nil
}

// writeCharts writes the charts, versions 1.0.0 and 1.0.1 of each, and
// the repository's index.
func writeCharts(dir, url string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	index := repo.NewIndexFile()
	for i := range chartsInRepo {
		for _, version := range []string{"1.0.0", "1.0.1"} {
			path, err := chartutil.Save(benchChart(i, version), dir)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			md := &chart.Metadata{APIVersion: chart.APIVersionV2, Name: chartName(i), Version: version}
			if err := index.MustAdd(md, filepath.Base(path), url, hex.EncodeToString(sum[:])); err != nil {
				return err
			}
		}
	}
	return index.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)
}

func chartName(i int) string { return fmt.Sprintf("chart-%02d", i) }

// benchChart is a chart as homelab apps have them: a Deployment, a
// Service, a ConfigMap and a claim; 1.0.1 runs another image.
func benchChart(i int, version string) *chart.Chart {
	image := "app:" + version
	values := fmt.Sprintf("image: %s\nsize: 1Gi\nreplicas: 1\n", image)
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: chartName(i), Version: version},
		Values: map[string]any{"image": image, "size": "1Gi", "replicas": 1},
		Raw:    []*chart.File{{Name: "values.yaml", Data: []byte(values)}}}
	for name, tmpl := range map[string]string{
		"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}, labels: {app: {{ .Release.Name }}, chart: {{ .Chart.Name }}-{{ .Chart.Version }}}}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      containers: [{name: app, image: {{ .Values.image }}, volumeMounts: [{name: data, mountPath: /data}]}]
      volumes: [{name: data, persistentVolumeClaim: {claimName: {{ .Release.Name }}-data}}]
`,
		"service.yaml":   "apiVersion: v1\nkind: Service\nmetadata: {name: {{ .Release.Name }}}\nspec: {selector: {app: {{ .Release.Name }}}, ports: [{port: 80}]}\n",
		"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\ndata: {release: {{ .Release.Name }}}\n",
		"claim.yaml":     "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: {{ .Release.Name }}-data}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: {{ .Values.size }}}}}\n",
	} {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(tmpl)})
	}
	return ch
}

// generateHelm writes the repository: clusters/bench has one
// Kustomization whose path holds the HelmRepository and the
// HelmReleases; branch head bumps the first c.changed to 1.0.1.
func generateHelm(dir, url string, c config) error {
	g, err := newGitDir(dir)
	if err != nil {
		return err
	}
	write, commit := g.write, g.commit
	files := map[string]string{
		"clusters/bench/releases.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: releases, namespace: flux-system}\n" +
			"spec: {interval: 10m, path: ./releases, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}\n",
		"releases/repository.yaml": "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: flux-system}\nspec: {interval: 1h, url: " + url + "}\n",
	}
	release := func(i int, version string) string {
		return fmt.Sprintf("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: release-%03d, namespace: apps}\n"+
			"spec:\n  interval: 1h\n  chart: {spec: {chart: %s, version: %q, sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}}}\n"+
			"  values: {replicas: 2}\n", i, chartName(i%chartsInRepo), version)
	}
	for i := range c.helmReleases {
		files[fmt.Sprintf("releases/release-%03d.yaml", i)] = release(i, "1.0.0")
	}
	for name, content := range files {
		if err := write(name, content); err != nil {
			return err
		}
	}
	if err := commit("base", "checkout", "-qb", "head"); err != nil {
		return err
	}
	for i := range c.changed {
		if err := write(fmt.Sprintf("releases/release-%03d.yaml", i), release(i, "1.0.1")); err != nil {
			return err
		}
	}
	return commit("head", "checkout", "-q", "main")
}

// timeHelmTemplate renders each bumped release at its new version with
// `helm template` from the chart files: the reference, one revision.
func timeHelmTemplate(c config, helm, charts string) (time.Duration, error) {
	var times []time.Duration
	for range c.runs {
		start := time.Now()
		for i := range c.changed {
			chartFile := filepath.Join(charts, chartName(i%chartsInRepo)+"-1.0.1.tgz")
			cmd := exec.Command(helm, "template", fmt.Sprintf("release-%03d", i), chartFile, "--namespace", "apps", "--set", "replicas=2")
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return 0, fmt.Errorf("helm template %s: %w", chartFile, err)
			}
		}
		times = append(times, time.Since(start))
	}
	return benchstat.Percentile(times, 50), nil
}
