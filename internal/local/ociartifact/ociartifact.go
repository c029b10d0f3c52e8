// Package ociartifact pushes a directory of manifests to a registry as an
// OCI artifact in Flux's format, as `flux push artifact` makes one: a
// config of media type application/vnd.cncf.flux.config.v1+json, one
// tar+gzip layer of the files, and the source and revision as
// annotations. strata up ships the example repository's OCIRepository
// source with it, and the benchmark its pushes; the OCIRepository tests
// push with Flux's own CLI.
package ociartifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Flux's media types.
const (
	ConfigMediaType  types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// PushDir pushes the regular files under dir to ref (host:port/repo:tag,
// plain HTTP) and returns the artifact's digest.
func PushDir(ctx context.Context, ref, dir, source, revision string) (string, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		return "", err
	}
	return Push(ctx, ref, files, source, revision)
}

// Push pushes files (slash-separated path to content) to ref.
func Push(ctx context.Context, ref string, files map[string][]byte, source, revision string) (string, error) {
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	layer, err := tarGzip(files)
	if err != nil {
		return "", err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(layer, ContentMediaType)})
	if err != nil {
		return "", err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), ConfigMediaType)
	img = mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.created":  time.Now().UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.revision": revision,
	}).(v1.Image)
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return "", err
	}
	d, err := img.Digest()
	return d.String(), err
}

func tarGzip(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	err := gz.Close()
	return buf.Bytes(), err
}
