// Package charts renders a HelmRelease offline as Flux's helm-controller
// installs it, with Helm's own SDK: the chart fetched from its
// HelmRepository (an HTTP index, or OCI), OCIRepository or this
// repository's files, cached by digest; the values and valuesFrom
// merged; the templates rendered; the post-renderers' kustomize patches
// applied. strata plan diffs what it installs.
package charts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"
)

// Limits on what is read from a chart source: a repository is hostile
// until checked, and an index or a chart is small.
const (
	maxIndex = 32 << 20
	maxChart = 16 << 20
)

// chartContentMediaType is a chart's layer in an OCI registry.
const chartContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

// Source is where a chart comes from.
type Source struct {
	// Kind is HelmRepository, OCIRepository or GitRepository.
	Kind string
	// URL: a HelmRepository's spec.url (https://, or oci:// with OCI),
	// an OCIRepository's spec.url (oci://host/path/chart).
	URL string
	OCI bool
	// Chart and Version: the chart's name and version or semver range
	// (a HelmRepository's); an OCIRepository's tag in Version.
	Chart, Version string
	// Insecure allows plain HTTP to an OCI registry.
	Insecure bool
	// Dir is the chart's directory, for GitRepository.
	Dir string
}

// String names the source in messages.
func (s Source) String() string {
	switch s.Kind {
	case "GitRepository":
		return "chart " + s.Dir + " of the repository"
	case "OCIRepository":
		return "chart " + s.URL + ":" + s.Version
	}
	return fmt.Sprintf("chart %s %s of %s", s.Chart, s.Version, s.URL)
}

// Fetcher gets charts, from its cache first.
type Fetcher struct {
	// Cache holds charts by digest and what each source resolved to.
	Cache string
	// Offline reads only the cache; a chart not in it is an error that
	// names it.
	Offline bool
	// Allowed are the hosts charts may be fetched from.
	Allowed func(host string) bool
	// Client is for HTTP chart repositories.
	Client *http.Client
}

// ErrNotCached is the error of an offline fetch of a chart not in the cache.
var ErrNotCached = errors.New("not in the chart cache (--offline)")

// Fetch loads the chart of a source and returns it with its digest.
func (f *Fetcher) Fetch(ctx context.Context, s Source) (*chart.Chart, string, error) {
	if s.Kind == "GitRepository" {
		ch, err := loader.LoadDir(s.Dir)
		return ch, "", err
	}
	key := cacheKey(s)
	if digest, err := os.ReadFile(filepath.Join(f.Cache, "refs", key)); err == nil {
		if ch, err := f.cached(string(digest)); err == nil {
			return ch, string(digest), nil
		}
	}
	if f.Offline {
		return nil, "", fmt.Errorf("%s: %w", s, ErrNotCached)
	}
	host, err := hostOf(s.URL)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", s, err)
	}
	if f.Allowed != nil && !f.Allowed(host) {
		return nil, "", fmt.Errorf("%s: host %s is not one the base revision's chart sources name, nor given with --chart-hosts: not fetched", s, host)
	}
	var data []byte
	if s.OCI || s.Kind == "OCIRepository" {
		data, err = f.pullOCI(ctx, s)
	} else {
		data, err = f.download(ctx, s)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", s, err)
	}
	digest := digestOf(data)
	if err := f.store(key, digest, data); err != nil {
		return nil, "", err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	return ch, digest, err
}

func cacheKey(s Source) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{s.Kind, s.URL, s.Chart, s.Version}, "\x00")))
	return hex.EncodeToString(sum[:])
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// cached loads a chart from the cache, checking its digest.
func (f *Fetcher) cached(digest string) (*chart.Chart, error) {
	data, err := os.ReadFile(f.blob(digest))
	if err != nil {
		return nil, err
	}
	if digestOf(data) != digest {
		return nil, fmt.Errorf("the cached chart %s does not match its digest", digest)
	}
	return loader.LoadArchive(bytes.NewReader(data))
}

func (f *Fetcher) blob(digest string) string {
	return filepath.Join(f.Cache, "blobs", strings.Replace(digest, ":", "-", 1)+".tgz")
}

// store writes the chart under its digest and what the source resolved to.
func (f *Fetcher) store(key, digest string, data []byte) error {
	for _, w := range []struct {
		path string
		data []byte
	}{{f.blob(digest), data}, {filepath.Join(f.Cache, "refs", key), []byte(digest)}} {
		if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
			return err
		}
		tmp := w.path + ".tmp"
		if err := os.WriteFile(tmp, w.data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, w.path); err != nil {
			return err
		}
	}
	return nil
}

// download reads the repository's index, picks the newest version the
// constraint allows, and downloads it, checking the index's digest.
func (f *Fetcher) download(ctx context.Context, s Source) ([]byte, error) {
	base := strings.TrimSuffix(s.URL, "/")
	raw, err := f.get(ctx, base+"/index.yaml", maxIndex)
	if err != nil {
		return nil, err
	}
	var index repo.IndexFile
	if err := yaml.Unmarshal(raw, &index); err != nil {
		return nil, fmt.Errorf("the repository's index.yaml: %w", err)
	}
	index.SortEntries()
	cv, err := index.Get(s.Chart, s.Version)
	if err != nil {
		return nil, fmt.Errorf("the repository's index: %w", err)
	}
	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("the index names no URL for %s %s", s.Chart, cv.Version)
	}
	u, err := url.Parse(cv.URLs[0])
	if err != nil {
		return nil, err
	}
	if !u.IsAbs() {
		b, _ := url.Parse(base + "/")
		u = b.ResolveReference(u)
	}
	if host, _ := hostOf(u.String()); f.Allowed != nil && !f.Allowed(host) {
		return nil, fmt.Errorf("the index sends the chart to host %s, which is not allowed", host)
	}
	data, err := f.get(ctx, u.String(), maxChart)
	if err != nil {
		return nil, err
	}
	if cv.Digest != "" && strings.TrimPrefix(digestOf(data), "sha256:") != cv.Digest {
		return nil, fmt.Errorf("%s does not match the digest the index gives", u)
	}
	return data, nil
}

// get reads a URL, bounded in size and time.
func (f *Fetcher) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	c := f.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", u, limit)
	}
	return data, nil
}

// pullOCI reads the chart layer of an OCI artifact: a HelmRepository of
// type oci holds it at URL/chart:version, an OCIRepository at URL:tag.
func (f *Fetcher) pullOCI(ctx context.Context, s Source) ([]byte, error) {
	ref := strings.TrimPrefix(s.URL, "oci://")
	if s.Kind == "HelmRepository" {
		ref = strings.TrimSuffix(ref, "/") + "/" + s.Chart
	}
	var opts []name.Option
	if s.Insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref+":"+s.Version, opts...)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if l.MediaType != chartContentMediaType {
			continue
		}
		if l.Size > maxChart {
			return nil, fmt.Errorf("%s: the chart is %d bytes, over %d", r, l.Size, maxChart)
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return nil, err
		}
		rc, err := layer.Compressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(io.LimitReader(rc, maxChart))
	}
	return nil, fmt.Errorf("%s holds no Helm chart layer", r)
}

// hostOf is the host (and port) of a chart source's URL.
func hostOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http", "https", "oci":
	default:
		return "", fmt.Errorf("URL %s: only http, https and oci chart sources are read", raw)
	}
	host := u.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = path.Clean(host)
	}
	return host, nil
}
