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
)

// packageChart writes the chart of the release as Helm's package
// (strata-VERSION.tgz under out): Chart.yaml's version and appVersion the
// release's, values naming the image by the version's tag and the index's
// digest. Entries are sorted, owned by root, every time at epoch, so that
// one commit gives one package.
func packageChart(chartDir, out, version string, digest v1.Hash, epoch time.Time) (string, error) {
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
		return "", err
	}
	edits := []struct {
		file, pattern, value string
	}{
		{"Chart.yaml", `(?m)^version: .*$`, "version: " + version},
		{"Chart.yaml", `(?m)^appVersion: .*$`, fmt.Sprintf("appVersion: %q", version)},
		{"values.yaml", `(?m)^  tag: "".*$`, fmt.Sprintf("  tag: %q", version)},
		{"values.yaml", `(?m)^  digest: "".*$`, fmt.Sprintf("  digest: %q", digest.String())},
	}
	for _, e := range edits {
		re := regexp.MustCompile(e.pattern)
		if !re.Match(files[e.file]) {
			return "", fmt.Errorf("the chart's %s has no line %s to set", e.file, e.pattern)
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
			return "", err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(out, "strata-"+version+".tgz")
	return path, os.WriteFile(path, buf.Bytes(), 0o644)
}
