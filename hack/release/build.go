package main

import (
	"bytes"
	"context"
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
}

var versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// Build writes the release's image index: one image per architecture, a
// root filesystem of the locked Debian packages with strata's binary on
// top. It returns the index's digest.
func Build(ctx context.Context, o Options) (v1.Hash, error) {
	if !versionPattern.MatchString(o.Version) {
		return v1.Hash{}, fmt.Errorf("version %q: give a semantic version such as 0.3.0", o.Version)
	}
	pkgs, err := readLock(o.Lock)
	if err != nil {
		return v1.Hash{}, err
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range Architectures {
		img, err := buildImage(ctx, o, arch, forArch(pkgs, arch))
		if err != nil {
			return v1.Hash{}, err
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	dir := filepath.Join(o.Out, "image")
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	if _, err := layout.Write(dir, index); err != nil {
		return v1.Hash{}, err
	}
	return index.Digest()
}

// buildImage is one architecture's image.
func buildImage(ctx context.Context, o Options, arch string, pkgs []Package) (v1.Image, error) {
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("the package lock %s has no package for %s: refresh it with make release-lock", o.Lock, arch)
	}
	base, err := baseLayer(ctx, o, arch, pkgs)
	if err != nil {
		return nil, err
	}
	bin, err := binaryLayer(ctx, o, arch)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, bin)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: o.Epoch}
	cfg.Config.Entrypoint = []string{"/usr/local/bin/strata"}
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.version": o.Version, "org.opencontainers.image.title": "strata"}
	return mutate.ConfigFile(img, cfg)
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

// binaryLayer is strata, built for arch: static, without paths of this
// machine, so that one commit gives one binary.
func binaryLayer(ctx context.Context, o Options, arch string) (v1.Layer, error) {
	out := filepath.Join(o.Cache, "bin", "strata-"+arch)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -buildid= -X main.version="+o.Version, "-o", out, "./cmd/strata")
	cmd.Dir = o.Repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building strata for %s: %w: %s", arch, err, strings.TrimSpace(string(b)))
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	fs := rootfs{}
	fs.put("usr/local/bin/strata", 0o755, data)
	return layerOf(fs, o.Epoch)
}

func layerOf(fs rootfs, epoch time.Time) (v1.Layer, error) {
	data, err := fs.tarball(epoch)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
