package main

import (
	"encoding/json"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// artifactSpec is an OCI manifest of one blob that is not an image: an
// SBOM, a signature, a chart.
type artifactSpec struct {
	// artifactType is the manifest's, which the registry's referrers
	// list shows; "" leaves it to the config's media type.
	artifactType string
	configType   types.MediaType
	config       []byte
	layer        []byte
	layerType    types.MediaType
	// layerAnnotations are the layer descriptor's (cosign's signature).
	layerAnnotations map[string]string
	// subject, if set, is what the artifact refers to.
	subject *v1.Descriptor
}

// newArtifact builds the manifest as given, byte for byte: go-containerregistry's
// mutate writes an image's config itself, and these carry their own.
func newArtifact(a artifactSpec) (v1.Image, error) {
	layer := static.NewLayer(a.layer, a.layerType)
	layerDesc, err := partial.Descriptor(layer)
	if err != nil {
		return nil, err
	}
	layerDesc.Annotations = a.layerAnnotations
	configDesc, err := partial.Descriptor(static.NewLayer(a.config, a.configType))
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: a.artifactType,
		Config: *configDesc, Layers: []v1.Descriptor{*layerDesc}}
	if a.subject != nil {
		m.Subject = &v1.Descriptor{MediaType: a.subject.MediaType, Digest: a.subject.Digest, Size: a.subject.Size}
	}
	manifest, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(rawImage{manifest: manifest, config: a.config, layer: layer})
}

// rawImage is an image whose manifest and config are given as bytes.
type rawImage struct {
	manifest, config []byte
	layer            v1.Layer
}

func (r rawImage) RawConfigFile() ([]byte, error)      { return r.config, nil }
func (r rawImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (r rawImage) RawManifest() ([]byte, error)        { return r.manifest, nil }

func (r rawImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := r.layer.Digest(); err == nil && d == h {
		return r.layer, nil
	}
	return nil, fmt.Errorf("the artifact has no blob %s", h)
}
