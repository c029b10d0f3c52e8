package main

import (
	"github.com/strata-gitops/strata/hack/debian"
	"github.com/strata-gitops/strata/sources/cosignsig"

	"bytes"
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what release to build, from what, where.
type Options struct {
	Version string
	// Repo is the repository's root: its cmd/strata is built.
	Repo string
	// Lock is the package lock; Cache holds the apt state and the
	// downloaded packages, across builds.
	Lock, Cache string
	// Out receives the release: the image index as an OCI layout in
	// Out/image.
	Out string
	// Epoch is every time in the image: the commit's.
	Epoch time.Time
	// Key signs the index (PEM, PKCS#8 ECDSA P-256); made, with
	// cosign.pub beside it, when missing.
	Key string
	// Architectures are those the images are built for: every one of
	// Architectures when empty, as a release is; the local cluster's
	// releases are built for the host's alone.
	Architectures []string
}

// architectures are the ones to build, checked against those a release
// can hold.
func (o Options) architectures() ([]string, error) {
	if len(o.Architectures) == 0 {
		return Architectures, nil
	}
	for _, a := range o.Architectures {
		if !slices.Contains(Architectures, a) {
			return nil, fmt.Errorf("architecture %q: a release is built for %v", a, Architectures)
		}
	}
	return o.Architectures, nil
}

var versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// refName is the layout annotation that names a manifest.
const refName = "org.opencontainers.image.ref.name"

// Build writes the release: an image index per component (strata, the
// CSI sidecars, the example app, the sandbox image), each with an image
// per architecture; beside them in one OCI layout, each image's SBOM as
// an artifact that refers to it, and each index's signature as cosign
// stores it; the chart, packaged for the release, naming every image it
// runs by tag and digest; the notes and SHA256SUMS. It returns strata's
// index's digest.
func Build(ctx context.Context, o Options) (v1.Hash, error) {
	if !versionPattern.MatchString(o.Version) {
		return v1.Hash{}, fmt.Errorf("version %q: give a semantic version such as 0.3.0", o.Version)
	}
	pkgs, err := fetchPackages(ctx, o)
	if err != nil {
		return v1.Hash{}, err
	}
	key, err := loadOrMakeKey(o.Key)
	if err != nil {
		return v1.Hash{}, err
	}
	comps, err := components(o)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return v1.Hash{}, err
	}
	var built []builtComponent
	for _, c := range comps {
		b, err := buildComponent(ctx, o, c, pkgs, key)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", c.name, err)
		}
		built = append(built, b)
	}
	chart, err := packageChart(filepath.Join(o.Repo, "charts", "strata"), o.Out, o.Version, built, o.Epoch)
	if err != nil {
		return v1.Hash{}, err
	}
	chartImage, err := chart.artifact()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeLayout(filepath.Join(o.Out, "image"), built, chartImage, key, o.Version); err != nil {
		return v1.Hash{}, err
	}
	if err := writeNotes(o, built, pkgs); err != nil {
		return v1.Hash{}, err
	}
	return built[0].digest, writeSums(o.Out)
}

// builtComponent is a component's index, its images' SBOMs and its
// signature, and the amd64 program, for the notes.
type builtComponent struct {
	component
	index     v1.ImageIndex
	digest    v1.Hash
	referrers []v1.Image
	signature v1.Image
	amd64     []byte
}

// buildComponent builds a component's image for every architecture, its
// SBOMs and the index's signature.
func buildComponent(ctx context.Context, o Options, c component, pkgs []debian.Package, key *ecdsa.PrivateKey) (builtComponent, error) {
	b := builtComponent{component: c, index: mutate.IndexMediaType(empty.Index, types.OCIImageIndex)}
	archs, err := o.architectures()
	if err != nil {
		return b, err
	}
	for _, arch := range archs {
		var base []debian.Package
		if c.onDebian {
			base = debian.ForArch(pkgs, arch)
		}
		img, binary, err := buildImage(ctx, o, c, arch, base)
		if err != nil {
			return b, err
		}
		if arch == "amd64" {
			b.amd64 = binary
		}
		desc, err := partial.Descriptor(img)
		if err != nil {
			return b, err
		}
		desc.Platform = &v1.Platform{OS: "linux", Architecture: arch}
		b.index = mutate.AppendManifests(b.index, mutate.IndexAddendum{Add: img, Descriptor: *desc})
		doc, err := sbom(c.name, c.tag, arch, binary, base, o.Epoch)
		if err != nil {
			return b, err
		}
		att, err := newArtifact(artifactSpec{artifactType: sbomMediaType, configType: types.OCIEmptyJSON, config: []byte("{}"),
			layer: doc, layerType: sbomMediaType, subject: desc})
		if err != nil {
			return b, err
		}
		b.referrers = append(b.referrers, att)
	}
	if b.digest, err = b.index.Digest(); err != nil {
		return b, err
	}
	b.signature, err = signature(key, c.name, b.digest)
	return b, err
}

// writeLayout writes the OCI layout: each index named NAME:TAG, the
// SBOMs, the chart named charts/strata:VERSION, and the signatures of the
// indexes and the chart, named as cosign names them.
func writeLayout(dir string, built []builtComponent, chart v1.Image, key *ecdsa.PrivateKey, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, b := range built {
		if err := p.AppendIndex(b.index, layout.WithAnnotations(map[string]string{refName: b.name + ":" + b.tag})); err != nil {
			return err
		}
		for _, r := range b.referrers {
			if err := p.AppendImage(r); err != nil {
				return err
			}
		}
		if err := p.AppendImage(b.signature, layout.WithAnnotations(map[string]string{refName: cosignsig.Tag(b.digest)})); err != nil {
			return err
		}
	}
	digest, err := chart.Digest()
	if err != nil {
		return err
	}
	sig, err := signature(key, chartRepository, digest)
	if err != nil {
		return err
	}
	if err := p.AppendImage(chart, layout.WithAnnotations(map[string]string{refName: chartRepository + ":" + version})); err != nil {
		return err
	}
	return p.AppendImage(sig, layout.WithAnnotations(map[string]string{refName: cosignsig.Tag(digest)}))
}

// signature is the index's signature as cosign stores it.
func signature(key *ecdsa.PrivateKey, repository string, digest v1.Hash) (v1.Image, error) {
	body, err := cosignsig.Payload(repository, digest)
	if err != nil {
		return nil, err
	}
	sig, err := cosignsig.Sign(key, body)
	if err != nil {
		return nil, err
	}
	return newArtifact(artifactSpec{configType: types.OCIConfigJSON, config: []byte("{}"), layer: body, layerType: cosignsig.MediaType,
		layerAnnotations: map[string]string{cosignsig.Annotation: sig}})
}

// buildImage is a component's image for an architecture, and its program:
// the packages' files in one layer (none without packages), the program
// and its files in the last.
func buildImage(ctx context.Context, o Options, c component, arch string, pkgs []debian.Package) (v1.Image, []byte, error) {
	var layers []v1.Layer
	if c.onDebian {
		if len(pkgs) == 0 {
			return nil, nil, fmt.Errorf("the package lock %s has no package for %s: refresh it with make release-lock", o.Lock, arch)
		}
		base, err := baseLayer(ctx, o, arch, pkgs)
		if err != nil {
			return nil, nil, err
		}
		layers = append(layers, base)
	}
	binary, err := c.build(ctx, o, arch)
	if err != nil {
		return nil, nil, err
	}
	fs := debian.Rootfs{}
	fs.Put(strings.TrimPrefix(c.binary, "/"), 0o755, binary)
	if c.extra != nil {
		c.extra(fs)
	}
	top, err := layerOf(fs, o.Epoch)
	if err != nil {
		return nil, nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), append(layers, top)...)
	if err != nil {
		return nil, nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: o.Epoch}
	cfg.Config.Entrypoint = []string{c.binary}
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.version": c.tag, "org.opencontainers.image.title": c.name}
	img, err = mutate.ConfigFile(img, cfg)
	return img, binary, err
}

// fetchPackages fetches the images' Debian packages for each architecture
// built: those of the lock, or the archive's current ones where it no
// longer serves a locked version (debian.APT.Fetch says so). The notes
// and SBOMs list what was fetched.
func fetchPackages(ctx context.Context, o Options) ([]debian.Package, error) {
	locked, err := debian.ReadLock(o.Lock)
	if err != nil {
		return nil, fmt.Errorf("%w; write it with make release-lock", err)
	}
	archs, err := o.architectures()
	if err != nil {
		return nil, err
	}
	var all []debian.Package
	for _, arch := range archs {
		a, debs, err := aptFor(o, arch)
		if err != nil {
			return nil, err
		}
		pkgs, _, err := a.Fetch(ctx, debian.ForArch(locked, arch), Roots, debs, os.Stderr, "make release-lock")
		if err != nil {
			return nil, err
		}
		all = append(all, pkgs...)
	}
	return all, nil
}

// aptFor is apt for one architecture, with its state and its .debs under
// the cache.
func aptFor(o Options, arch string) (debian.APT, string, error) {
	debs := filepath.Join(o.Cache, "debs", arch)
	return debian.APT{Arch: arch, Dir: filepath.Join(o.Cache, "apt", arch)}, debs, os.MkdirAll(debs, 0o755)
}

// baseLayer is the fetched packages' files, unpacked.
func baseLayer(ctx context.Context, o Options, arch string, pkgs []debian.Package) (v1.Layer, error) {
	a, debs, err := aptFor(o, arch)
	if err != nil {
		return nil, err
	}
	paths, err := a.Download(ctx, pkgs, debs)
	if err != nil {
		return nil, err
	}
	fs := debian.Rootfs{}
	for _, p := range pkgs {
		if err := fs.Unpack(ctx, paths[p.Name]); err != nil {
			return nil, err
		}
	}
	// lvm2 runs in a container without udev: the host's udev names
	// devices, so lvm must not wait for it.
	if err := fs.Edit("etc/lvm/lvm.conf", func(b []byte) []byte {
		b = regexp.MustCompile(`(?m)^(\s*)# udev_sync = 1`).ReplaceAll(b, []byte("${1}udev_sync = 0"))
		return regexp.MustCompile(`(?m)^(\s*)# udev_rules = 1`).ReplaceAll(b, []byte("${1}udev_rules = 0"))
	}); err != nil {
		return nil, err
	}
	return layerOf(fs, o.Epoch)
}

func layerOf(fs debian.Rootfs, epoch time.Time) (v1.Layer, error) {
	data, err := fs.Tarball(epoch)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
