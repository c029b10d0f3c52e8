package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
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
}

var versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// refName is the layout annotation that names a manifest.
const refName = "org.opencontainers.image.ref.name"

// Build writes the release's image index: one image per architecture, a
// root filesystem of the locked Debian packages with strata's binary on
// top; beside it in the layout, each image's SBOM as an artifact that
// refers to it, and the index's signature as cosign stores it; and the
// chart, packaged for the release. It returns the index's digest.
func Build(ctx context.Context, o Options) (v1.Hash, error) {
	if !versionPattern.MatchString(o.Version) {
		return v1.Hash{}, fmt.Errorf("version %q: give a semantic version such as 0.3.0", o.Version)
	}
	pkgs, err := readLock(o.Lock)
	if err != nil {
		return v1.Hash{}, err
	}
	key, err := loadOrMakeKey(o.Key)
	if err != nil {
		return v1.Hash{}, err
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var referrers []v1.Image
	var amd64Binary []byte
	for _, arch := range Architectures {
		img, binary, err := buildImage(ctx, o, arch, forArch(pkgs, arch))
		if err != nil {
			return v1.Hash{}, err
		}
		if arch == "amd64" {
			amd64Binary = binary
		}
		desc, err := partial.Descriptor(img)
		if err != nil {
			return v1.Hash{}, err
		}
		desc.Platform = &v1.Platform{OS: "linux", Architecture: arch}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: *desc})
		doc, err := sbom(o.Version, arch, binary, forArch(pkgs, arch), o.Epoch)
		if err != nil {
			return v1.Hash{}, err
		}
		att, err := artifact(doc, sbomMediaType, desc, nil)
		if err != nil {
			return v1.Hash{}, err
		}
		referrers = append(referrers, att)
	}
	digest, err := index.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	sig, err := signature(key, digest)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeLayout(filepath.Join(o.Out, "image"), o.Version, index, referrers, sig, digest); err != nil {
		return v1.Hash{}, err
	}
	if _, err := packageChart(filepath.Join(o.Repo, "charts", "strata"), o.Out, o.Version, digest, o.Epoch); err != nil {
		return v1.Hash{}, err
	}
	if err := writeNotes(o, digest, amd64Binary, pkgs); err != nil {
		return v1.Hash{}, err
	}
	return digest, writeSums(o.Out)
}

// writeLayout writes the OCI layout: the index named by the version, the
// SBOMs, and the signature named as cosign names it.
func writeLayout(dir, version string, index v1.ImageIndex, referrers []v1.Image, sig v1.Image, digest v1.Hash) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(index, layout.WithAnnotations(map[string]string{refName: version})); err != nil {
		return err
	}
	for _, r := range referrers {
		if err := p.AppendImage(r); err != nil {
			return err
		}
	}
	return p.AppendImage(sig, layout.WithAnnotations(map[string]string{refName: signatureTag(digest)}))
}

// artifact is an OCI manifest of one blob, referring to subject.
func artifact(data []byte, mediaType types.MediaType, subject *v1.Descriptor, annotations map[string]string) (v1.Image, error) {
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: static.NewLayer(data, mediaType), Annotations: annotations})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if subject != nil {
		img = mutate.Subject(img, v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}).(v1.Image)
	}
	return img, nil
}

// signature is the index's signature as cosign stores it.
func signature(key *ecdsa.PrivateKey, digest v1.Hash) (v1.Image, error) {
	body, err := payload("strata", digest)
	if err != nil {
		return nil, err
	}
	sig, err := sign(key, body)
	if err != nil {
		return nil, err
	}
	return artifact(body, signatureMediaType, nil, map[string]string{signatureAnnotation: sig})
}

// buildImage is one architecture's image, and strata's binary in it.
func buildImage(ctx context.Context, o Options, arch string, pkgs []Package) (v1.Image, []byte, error) {
	if len(pkgs) == 0 {
		return nil, nil, fmt.Errorf("the package lock %s has no package for %s: refresh it with make release-lock", o.Lock, arch)
	}
	base, err := baseLayer(ctx, o, arch, pkgs)
	if err != nil {
		return nil, nil, err
	}
	binary, err := buildBinary(ctx, o, arch)
	if err != nil {
		return nil, nil, err
	}
	fs := rootfs{}
	fs.put("usr/local/bin/strata", 0o755, binary)
	bin, err := layerOf(fs, o.Epoch)
	if err != nil {
		return nil, nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, bin)
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
	cfg.Config.Entrypoint = []string{"/usr/local/bin/strata"}
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.version": o.Version, "org.opencontainers.image.title": "strata"}
	img, err = mutate.ConfigFile(img, cfg)
	return img, binary, err
}

// baseLayer is the locked packages' files, unpacked.
func baseLayer(ctx context.Context, o Options, arch string, pkgs []Package) (v1.Layer, error) {
	a := apt{arch: arch, dir: filepath.Join(o.Cache, "apt", arch)}
	debs := filepath.Join(o.Cache, "debs", arch)
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, err
	}
	paths, err := a.download(ctx, pkgs, debs)
	if err != nil {
		return nil, err
	}
	fs := rootfs{}
	for _, p := range pkgs {
		if err := fs.unpack(ctx, paths[p.Name]); err != nil {
			return nil, err
		}
	}
	// lvm2 runs in a container without udev: the host's udev names
	// devices, so lvm must not wait for it.
	if err := fs.edit("etc/lvm/lvm.conf", func(b []byte) []byte {
		b = regexp.MustCompile(`(?m)^(\s*)# udev_sync = 1`).ReplaceAll(b, []byte("${1}udev_sync = 0"))
		return regexp.MustCompile(`(?m)^(\s*)# udev_rules = 1`).ReplaceAll(b, []byte("${1}udev_rules = 0"))
	}); err != nil {
		return nil, err
	}
	return layerOf(fs, o.Epoch)
}

// buildBinary builds strata for arch: static, without paths of this
// machine, so that one commit gives one binary.
func buildBinary(ctx context.Context, o Options, arch string) ([]byte, error) {
	out := filepath.Join(o.Cache, "bin", "strata-"+arch)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -buildid= -X main.version="+o.Version, "-o", out, "./cmd/strata")
	cmd.Dir = o.Repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building strata for %s: %w: %s", arch, err, strings.TrimSpace(string(b)))
	}
	return os.ReadFile(out)
}

func layerOf(fs rootfs, epoch time.Time) (v1.Layer, error) {
	data, err := fs.tarball(epoch)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
