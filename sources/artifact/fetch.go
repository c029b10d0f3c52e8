package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	meta "github.com/fluxcd/pkg/apis/meta"
)

// Fetcher brings artifacts another controller serves (Flux's
// source-controller, a producer of ExternalArtifacts) into a Storage: the
// URL's host must be one of Hosts, the download is bounded by the
// storage's limits and a timeout, and its digest must be the one the
// source's status names before any file of it is used.
type Fetcher struct {
	Storage *Storage
	// Hosts are the host[:port]s artifacts may be downloaded from.
	Hosts []string
	// Client makes the requests; nil for one with Timeout.
	Client  *http.Client
	Timeout time.Duration

	// fetched maps a source's directory and a remote artifact's digest to
	// its copy in Storage. It is per source: a copy fetched for one is
	// never handed to another that names the same digest, so that naming
	// a digest seen elsewhere neither skips the host check nor reads
	// another tenant's artifact.
	fetched sync.Map
}

// DefaultFetchTimeout bounds one download.
const DefaultFetchTimeout = 2 * time.Minute

// Dir is the extracted remote artifact a, downloaded the first time and
// kept under objectDir; older copies there are removed.
func (f *Fetcher) Dir(ctx context.Context, a *meta.Artifact, objectDir string) (string, error) {
	key := objectDir + "@" + a.Digest
	if local, ok := f.fetched.Load(key); ok && f.Storage.Has(local.(*meta.Artifact)) {
		return f.Storage.Dir(local.(*meta.Artifact))
	}
	if err := f.allowed(a.URL); err != nil {
		return "", err
	}
	files, err := f.download(ctx, a)
	if err != nil {
		return "", fmt.Errorf("artifact %s (revision %s): %w", a.URL, a.Revision, err)
	}
	local, err := f.Storage.Store(objectDir, a.Revision, files)
	if err != nil {
		return "", err
	}
	f.fetched.Store(key, local)
	_ = f.Storage.GarbageCollect(objectDir, local)
	return f.Storage.Dir(local)
}

// allowed checks the URL's scheme and host against the allow-list.
func (f *Fetcher) allowed(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("artifact URL '%s' is not an http(s) URL", raw)
	}
	// Flux's source-controller advertises a fully qualified name with its
	// trailing dot: "source-controller.flux-system.svc.cluster.local.".
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	withPort := host
	if u.Port() != "" {
		withPort = net.JoinHostPort(host, u.Port())
	}
	for _, h := range f.Hosts {
		h = strings.ToLower(h)
		if hh, p, err := net.SplitHostPort(h); err == nil {
			h = net.JoinHostPort(strings.TrimSuffix(hh, "."), p)
		} else {
			h = strings.TrimSuffix(h, ".")
		}
		if h == host || h == withPort {
			return nil
		}
	}
	return fmt.Errorf("artifact URL '%s': host '%s' is not one strata downloads artifacts from; "+
		"add it to the controller's --remote-artifact-hosts (chart value controller.remoteArtifactHosts) if that controller is trusted", raw, u.Host)
}

// download reads the tarball within the limits, checking its digest.
func (f *Fetcher) download(ctx context.Context, a *meta.Artifact) ([]File, error) {
	algo, want, ok := strings.Cut(a.Digest, ":")
	if !ok || algo != "sha256" {
		return nil, fmt.Errorf("digest '%s' is not a sha256 digest, the only kind strata checks", a.Digest)
	}
	timeout := f.Timeout
	if timeout == 0 {
		timeout = DefaultFetchTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{}
	if f.Client != nil {
		*c = *f.Client
	}
	// A redirect is another outbound URL: it must be allowed too.
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return fmt.Errorf("more than 10 redirects")
		}
		return f.allowed(req.URL.String())
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download answered %s", resp.Status)
	}
	limit := f.Storage.Limits.Artifact
	body := io.Reader(resp.Body)
	if limit > 0 {
		body = io.LimitReader(resp.Body, limit+1)
	}
	hash := sha256.New()
	counted := &countingReader{r: io.TeeReader(body, hash)}
	files, err := Unpack(counted, f.Storage.Limits)
	if err != nil {
		return nil, err
	}
	// gzip stops at its stream's end: what follows counts for the digest.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return nil, err
	}
	if limit > 0 && counted.n > limit {
		return nil, fmt.Errorf("the download is over %d bytes, the limit per artifact", limit)
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != want {
		return nil, fmt.Errorf("the download has digest sha256:%s, not %s as the source's status says: nothing of it is used", got, a.Digest)
	}
	return files, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
