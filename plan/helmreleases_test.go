package plan_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
	helmrepo "helm.sh/helm/v3/pkg/repo"

	localregistry "github.com/strata-gitops/strata/internal/local/registry"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/risk"
)

// appChart is a chart made in the test: a Deployment of image, and with
// claim a PersistentVolumeClaim the release owns.
func appChart(t *testing.T, version, image string, claim bool) []byte {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "app", Version: version},
		Values: map[string]any{"image": image, "size": "1Gi"},
		Raw:    []*chart.File{{Name: "values.yaml", Data: []byte("image: " + image + "\nsize: 1Gi\n")}}}
	ch.Templates = append(ch.Templates, &chart.File{Name: "templates/deployment.yaml", Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: app, image: {{ .Values.image }}}]}
`)})
	if claim {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/claim.yaml", Data: []byte(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: {{ .Release.Name }}-data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: {{ .Values.size }}}}
`)})
	}
	dir := t.TempDir()
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// charts are the test's three versions of the chart: 1.0.0 with its
// claim, 1.0.1 another image only, 1.1.0 without the claim.
func testCharts(t *testing.T) map[string][]byte {
	return map[string][]byte{
		"1.0.0": appChart(t, "1.0.0", "app:1", true),
		"1.0.1": appChart(t, "1.0.1", "app:2", true),
		"1.1.0": appChart(t, "1.1.0", "app:1", false),
	}
}

// serveChartRepository serves the charts as an HTTP chart repository
// with its index.yaml.
func serveChartRepository(t *testing.T, charts map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	index := helmrepo.NewIndexFile()
	for version, data := range charts {
		name := "app-" + version + ".tgz"
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if err := index.MustAdd(&chart.Metadata{APIVersion: chart.APIVersionV2, Name: "app", Version: version}, name, srv.URL, hex.EncodeToString(sum[:])); err != nil {
			t.Fatal(err)
		}
	}
	if err := index.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL
}

// pushToRegistry runs distribution's registry on loopback and pushes the
// charts as OCI artifacts under charts/app.
func pushToRegistry(t *testing.T, charts map[string][]byte) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "registry")
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "bin/registry is not built: run hack/tools.sh registry")
	}
	addr := freeLoopback(t)
	reg, err := localregistry.Start(context.Background(), bin, t.TempDir(), addr, filepath.Join(t.TempDir(), "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Process.Kill(); _ = reg.Wait() })
	client, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	for version, data := range charts {
		if _, err := client.Push(data, fmt.Sprintf("%s/charts/app:%s", addr, version)); err != nil {
			t.Fatal(err)
		}
	}
	return addr
}

// helmRepository is a fixture with a HelmRepository of url and a
// HelmRelease of the app chart at version.
func helmFiles(url, typ, version string) map[string]string {
	files := fixture()
	spec := "  url: " + url + "\n"
	if typ != "" {
		spec += "  type: " + typ + "\n"
	}
	files["infrastructure/charts.yaml"] = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: flux-system}\nspec:\n  interval: 1h\n" + spec
	files["apps/app.yaml"] = helmRelease(version)
	return files
}

func helmRelease(version string) string {
	return `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: app, namespace: databases}
spec:
  interval: 1h
  chart:
    spec:
      chart: app
      version: "` + version + `"
      sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}
  values: {size: 2Gi}
`
}

func runCharts(t *testing.T, r *repo, head string, charts plan.ChartOptions) *plan.Plan {
	t.Helper()
	return planOf(t, r, head, func(o *plan.Options) { o.Charts = charts })
}

// A HelmRelease's chart is rendered on both sides, from an HTTP chart
// repository and from an OCI registry, and what it installs is judged: a
// chart bump that drops a claim destroys data, one that changes only an
// image is safe. Charts are cached by digest: offline, a cached chart
// renders and a missing one is named.
func TestHelmReleasesAreRenderedAsTheyInstall(t *testing.T) {
	charts := testCharts(t)
	sources := map[string][2]string{
		"http": {serveChartRepository(t, charts), ""},
		"oci":  {"oci://" + pushToRegistry(t, charts) + "/charts", "oci"},
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			r := newRepo(t, helmFiles(src[0], src[1], "1.0.0"))
			r.branch("drops-claim", map[string]string{"apps/app.yaml": helmRelease("1.1.0")})
			r.branch("image", map[string]string{"apps/app.yaml": helmRelease("1.0.1")})
			cache := t.TempDir()
			opts := plan.ChartOptions{Cache: cache}

			p := runCharts(t, r, "drops-claim", opts)
			ch, ok := findChange(p, "HelmRelease.helm.toolkit.fluxcd.io/databases/app")
			if !ok {
				t.Fatalf("no change of the HelmRelease:\n%s", dump(p))
			}
			if ch.Risk != risk.DestroysData || !strings.Contains(strings.Join(ch.Reasons, "\n"), "PersistentVolumeClaim/databases/app-data") {
				t.Errorf("a bump that drops the chart's claim is %s %q, want destroys-data naming the claim", ch.Risk, ch.Reasons)
			}
			if !installs(ch, "PersistentVolumeClaim/databases/app-data", plan.Deleted, risk.DestroysData) {
				t.Errorf("the installs do not list the claim's deletion: %+v", ch.Installs)
			}

			p = runCharts(t, r, "image", opts)
			ch, _ = findChange(p, "HelmRelease.helm.toolkit.fluxcd.io/databases/app")
			if ch.Risk != risk.Safe || !installs(ch, "Deployment.apps/databases/app", plan.Changed, risk.Safe) || len(ch.Installs) != 1 {
				t.Errorf("an image bump is %s with installs %+v, want safe with the Deployment changed alone", ch.Risk, ch.Installs)
			}
			if !regexp.MustCompile(`(?m)^\+.*image: app:2$`).MatchString(ch.Installs[0].Diff) {
				t.Errorf("the Deployment's diff does not show the image:\n%s", ch.Installs[0].Diff)
			}

			p = runCharts(t, r, "image", plan.ChartOptions{Cache: cache, Offline: true})
			if ch, _ := findChange(p, "HelmRelease.helm.toolkit.fluxcd.io/databases/app"); len(ch.Installs) != 1 {
				t.Errorf("offline with the charts cached: installs %+v, warnings %v", ch.Installs, p.Warnings)
			}
			p = runCharts(t, r, "image", plan.ChartOptions{Cache: t.TempDir(), Offline: true})
			if !strings.Contains(strings.Join(p.Warnings, "\n"), "chart app 1.0.1") || !strings.Contains(strings.Join(p.Warnings, "\n"), "not in the chart cache") {
				t.Errorf("offline with an empty cache: warnings %v, want the missing chart named", p.Warnings)
			}
		})
	}
}

// A chart source a change adds is not fetched unless --chart-hosts names
// its host: a pull request must not make the plan fetch from anywhere.
func TestANewChartSourceIsNotFetched(t *testing.T) {
	url := serveChartRepository(t, testCharts(t))
	r := newRepo(t, fixture())
	files := helmFiles(url, "", "1.0.0")
	r.branch("adds", map[string]string{"infrastructure/charts.yaml": files["infrastructure/charts.yaml"], "apps/app.yaml": files["apps/app.yaml"]})
	p := runCharts(t, r, "adds", plan.ChartOptions{Cache: t.TempDir()})
	if w := strings.Join(p.Warnings, "\n"); !strings.Contains(w, "is not one the base revision's chart sources name") {
		t.Errorf("warnings %q; want the new source refused", w)
	}
	host := strings.TrimPrefix(url, "http://")
	p = runCharts(t, r, "adds", plan.ChartOptions{Cache: t.TempDir(), Hosts: []string{host}})
	ch, _ := findChange(p, "HelmRelease.helm.toolkit.fluxcd.io/databases/app")
	if !installs(ch, "PersistentVolumeClaim/databases/app-data", plan.Created, risk.Safe) {
		t.Errorf("with --chart-hosts %s the chart is not rendered: %+v %v", host, ch, p.Warnings)
	}
}

func installs(ch plan.Change, object, action, class string) bool {
	for _, sub := range ch.Installs {
		if sub.Object.String() == object && sub.Action == action && sub.Risk == class {
			return true
		}
	}
	return false
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	return addr
}
