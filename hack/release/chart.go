package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"
)

// packageChart writes the chart of the release as Helm's package
// (strata-VERSION.tgz under out): Chart.yaml's version and appVersion the
// release's, values naming strata's and strata-node's images by the
// version's tag and their indexes' digests, and each CSI sidecar by the release's name, tag and
// digest. Entries are sorted, owned by root, every time at epoch, so that
// one commit gives one package.
func packageChart(chartDir, out, version string, built []builtComponent, epoch time.Time) (chartPackage, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(chartDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(chartDir, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		return chartPackage{}, err
	}
	type edit struct{ file, pattern, value string }
	edits := []edit{
		{"Chart.yaml", `(?m)^version: .*$`, "version: " + version},
		{"Chart.yaml", `(?m)^appVersion: .*$`, fmt.Sprintf("appVersion: %q", version)},
		{"values.yaml", `(?m)^  tag: "".*$`, fmt.Sprintf("  tag: %q", version)},
		{"values.yaml", `(?m)^  digest: "".*$`, fmt.Sprintf("  digest: %q", built[0].digest.String())},
	}
	for _, b := range built {
		if b.name == "strata-node" {
			edits = append(edits, edit{"values.yaml", `(?m)^nodeImage: \{.*\}$`,
				fmt.Sprintf("nodeImage: {repository: \"\", tag: %q, digest: %q}", b.tag, b.digest.String())})
		}
		if b.chartValue != "" {
			edits = append(edits, edit{"values.yaml", `(?m)^  ` + regexp.QuoteMeta(b.chartValue) + `: \{.*\}$`,
				fmt.Sprintf("  %s: {name: %s, tag: %s, digest: %q}", b.chartValue, b.name, b.tag, b.digest.String())})
		}
	}
	for _, e := range edits {
		re := regexp.MustCompile(e.pattern)
		if !re.Match(files[e.file]) {
			return chartPackage{}, fmt.Errorf("the chart's %s has no line %s to set", e.file, e.pattern)
		}
		files[e.file] = re.ReplaceAll(files[e.file], []byte(e.value))
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		hdr := &tar.Header{Name: "strata/" + n, Mode: 0o644, Size: int64(len(files[n])), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return chartPackage{}, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return chartPackage{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return chartPackage{}, err
	}
	if err := zw.Close(); err != nil {
		return chartPackage{}, err
	}
	path := filepath.Join(out, "strata-"+version+".tgz")
	return chartPackage{version: version, meta: files["Chart.yaml"], tgz: buf.Bytes()}, os.WriteFile(path, buf.Bytes(), 0o644)
}

// chartPackage is the packaged chart and its Chart.yaml.
type chartPackage struct {
	version string
	meta    []byte
	tgz     []byte
}

// Helm's media types for a chart stored in an OCI registry.
const (
	chartConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	chartContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	// chartRef is the chart's name in the layout, as it is pushed: the
	// charts/ repository keeps it apart from strata's image.
	chartRepository = "charts/strata"
)

// artifact is the chart as Helm stores it in a registry: Chart.yaml as
// JSON in the config, the package as the one layer. Built here rather
// than by `helm push`, which stamps the time of the push, so that it is
// the same for one commit and is signed like the images.
func (c chartPackage) artifact() (v1.Image, error) {
	config, err := yaml.YAMLToJSON(c.meta)
	if err != nil {
		return nil, fmt.Errorf("the chart's Chart.yaml: %w", err)
	}
	return newArtifact(artifactSpec{configType: chartConfigMediaType, config: config, layer: c.tgz, layerType: chartContentMediaType})
}
