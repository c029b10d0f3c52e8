package oci

import (
	"context"
	"fmt"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-gitops/strata/sources/artifact"
)

// layerFiles pulls the artifact's manifest and the chosen layer, and
// returns the files of the layer's tar+gzip that belong in the artifact,
// with the manifest's annotations. The layer is bounded by limits before
// it is read and as it is unpacked; its digest is checked as it streams.
func (g *registry) layerFiles(ctx context.Context, want wanted, sel *sourcev1.OCILayerSelector, limits artifact.Limits) ([]artifact.File, map[string]string, error) {
	img, err := remote.Image(want.digest, append(g.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, nil, fmt.Errorf("pulling '%s': %w", want.digest, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the manifest of '%s': %w", want.digest, err)
	}
	desc, err := pickLayer(m, sel)
	if err != nil {
		return nil, nil, fmt.Errorf("'%s': %w", want.digest, err)
	}
	if limits.Artifact > 0 && desc.Size > limits.Artifact {
		return nil, nil, fmt.Errorf("the layer %s of '%s' is %d bytes, over the limit of %d per artifact", desc.Digest, want.digest, desc.Size, limits.Artifact)
	}
	layer, err := img.LayerByDigest(desc.Digest)
	if err != nil {
		return nil, nil, err
	}
	blob, err := layer.Compressed()
	if err != nil {
		return nil, nil, fmt.Errorf("pulling the layer %s of '%s': %w", desc.Digest, want.digest, err)
	}
	defer blob.Close()
	files, err := artifact.Unpack(blob, limits)
	if err != nil {
		return nil, nil, fmt.Errorf("extracting the layer %s of '%s' (a tar+gzip, as flux push artifact makes): %w", desc.Digest, want.digest, err)
	}
	return files, m.Annotations, nil
}
