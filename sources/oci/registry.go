package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"regexp"

	"github.com/Masterminds/semver/v3"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// maxTags bounds the tags read for a semver range: a registry answering
// without end must not hold the controller.
const maxTags = 10000

// registry is one repository reached with the object's credentials.
type registry struct {
	repo name.Repository
	opts []remote.Option
	// base is the transport the options name, nil for the default.
	base http.RoundTripper
}

// transport is the registry's transport, or go-containerregistry's
// default one.
func (g *registry) transport() http.RoundTripper {
	if g.base != nil {
		return g.base
	}
	return remote.DefaultTransport
}

// wanted is the artifact a reference resolved to.
type wanted struct {
	digest   name.Digest
	revision string
}

// resolve finds the artifact spec.ref names: a digest as it is, a tag or
// the highest tag in a semver range by the registry's answer. Flux's
// revision is "<tag>@<digest>", or the digest alone.
func (g *registry) resolve(ctx context.Context, ref *sourcev1.OCIRepositoryRef) (wanted, error) {
	if ref != nil && ref.Digest != "" {
		d, err := name.NewDigest(g.repo.Name()+"@"+ref.Digest, name.Insecure)
		if err != nil {
			return wanted{}, fmt.Errorf("spec.ref.digest '%s' is not a digest: %w", ref.Digest, err)
		}
		return wanted{digest: g.repo.Digest(d.DigestStr()), revision: d.DigestStr()}, nil
	}
	tag := "latest"
	if ref != nil && ref.Tag != "" {
		tag = ref.Tag
	}
	if ref != nil && ref.SemVer != "" {
		var err error
		if tag, err = g.semverTag(ctx, ref.SemVer, ref.SemverFilter); err != nil {
			return wanted{}, err
		}
	}
	desc, err := remote.Head(g.repo.Tag(tag), append(g.opts, remote.WithContext(ctx))...)
	if err != nil {
		return wanted{}, fmt.Errorf("resolving tag '%s' of '%s': %w%s", tag, g.repo, err, hint(err))
	}
	return wanted{digest: g.repo.Digest(desc.Digest.String()), revision: tag + "@" + desc.Digest.String()}, nil
}

// semverTag is the highest tag in the range, among those the filter
// keeps, as Flux picks it.
func (g *registry) semverTag(ctx context.Context, rng, filter string) (string, error) {
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return "", fmt.Errorf("spec.ref.semver '%s' is not a semver range: %w", rng, err)
	}
	var keep *regexp.Regexp
	if filter != "" {
		if keep, err = regexp.Compile(filter); err != nil {
			return "", fmt.Errorf("spec.ref.semverFilter '%s' is not a regular expression: %w", filter, err)
		}
	}
	tags, err := g.tags(ctx)
	if err != nil {
		return "", err
	}
	var best *semver.Version
	bestTag := ""
	for _, t := range tags {
		if keep != nil && !keep.MatchString(t) {
			continue
		}
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestTag = v, t
		}
	}
	if best == nil {
		return "", fmt.Errorf("no tag of '%s' is in the range '%s'", g.repo, rng)
	}
	return bestTag, nil
}

// tagPageLimit bounds one page of the tag list as read: a thousand tags
// take some tens of KiB; a registry that ignores the page size and sends
// everything, or without end, is cut here.
const tagPageLimit = 4 << 20

// tags lists the repository's tags page by page, and stops with an error
// once there are more than maxTags, before reading further.
func (g *registry) tags(ctx context.Context) ([]string, error) {
	opts := append(slices.Clone(g.opts), remote.WithContext(ctx), remote.WithPageSize(1000),
		remote.WithTransport(boundedBodies{next: g.transport(), limit: tagPageLimit}))
	p, err := remote.NewPuller(opts...)
	if err == nil {
		var l *remote.Lister
		if l, err = p.Lister(ctx, g.repo); err == nil {
			var tags []string
			for l.HasNext() {
				page, err := l.Next(ctx)
				if err != nil {
					return nil, fmt.Errorf("listing the tags of '%s': %w", g.repo, err)
				}
				if tags = append(tags, page.Tags...); len(tags) > maxTags {
					return nil, fmt.Errorf("'%s' has more than %d tags, the limit a semver range is resolved among", g.repo, maxTags)
				}
			}
			return tags, nil
		}
	}
	return nil, fmt.Errorf("listing the tags of '%s': %w", g.repo, err)
}

// boundedBodies cuts every answer's body at limit bytes: reading past it
// is an error, never more memory.
type boundedBodies struct {
	next  http.RoundTripper
	limit int64
}

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: b.limit}
	}
	return resp, err
}

// limitedBody fails a read past its limit, so a decoder sees an error
// rather than a truncated, valid-looking list, and closes the answer
// then: go-containerregistry does not close a body it failed to decode,
// and the connection would stay open with the registry still sending.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		_ = l.Close()
		return 0, fmt.Errorf("the registry's answer is larger than %d bytes", tagPageLimit)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.ReadCloser.Read(p)
	l.left -= int64(n)
	return n, err
}

// errNoLayers says an artifact has nothing to extract.
var errNoLayers = errors.New("the artifact has no layers")

// pickLayer is the layer the selector names, or the first one.
func pickLayer(m *v1.Manifest, sel *sourcev1.OCILayerSelector) (v1.Descriptor, error) {
	if len(m.Layers) == 0 {
		return v1.Descriptor{}, errNoLayers
	}
	if sel == nil || sel.MediaType == "" {
		return m.Layers[0], nil
	}
	i := slices.IndexFunc(m.Layers, func(d v1.Descriptor) bool { return string(d.MediaType) == sel.MediaType })
	if i < 0 {
		return v1.Descriptor{}, fmt.Errorf("no layer of media type '%s' (spec.layerSelector.mediaType)", sel.MediaType)
	}
	return m.Layers[i], nil
}

// hint says what to do about a registry's refusal.
func hint(err error) string {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return ""
	}
	switch terr.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return "; the registry refused the credentials, or asks for some: name a kubernetes.io/dockerconfigjson Secret for it in spec.secretRef"
	case http.StatusNotFound:
		return "; no such tag or repository: check spec.url and spec.ref"
	}
	return ""
}
