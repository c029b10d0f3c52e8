package ociartifact_test

import (
	"context"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-gitops/strata/internal/local/ociartifact"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// What Push makes has the shape of what Flux's own CLI pushes: the same
// manifest and config media types, layer media types and annotation keys.
func TestPushMakesWhatFluxPushArtifactMakes(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	files := map[string]string{"apps/cm.yaml": "kind: ConfigMap\n"}
	fluxDigest := testenv.FluxPushArtifact(t, host+"/flux:v1", files)
	ours, err := ociartifact.Push(context.Background(), host+"/ours:v1", map[string][]byte{"apps/cm.yaml": []byte(files["apps/cm.yaml"])},
		"https://example.com/infra.git", "main@sha1:0123456789abcdef0123456789abcdef01234567")
	if err != nil {
		t.Fatal(err)
	}
	a, b := manifest(t, host+"/flux@"+fluxDigest), manifest(t, host+"/ours@"+ours)
	if a.MediaType != b.MediaType || a.Config.MediaType != b.Config.MediaType {
		t.Fatalf("media types: flux %s/%s, ours %s/%s", a.MediaType, a.Config.MediaType, b.MediaType, b.Config.MediaType)
	}
	if len(a.Layers) != len(b.Layers) || a.Layers[0].MediaType != b.Layers[0].MediaType {
		t.Fatalf("layers: flux %+v, ours %+v", a.Layers, b.Layers)
	}
	if ka, kb := slices.Sorted(maps.Keys(a.Annotations)), slices.Sorted(maps.Keys(b.Annotations)); !slices.Equal(ka, kb) {
		t.Fatalf("annotations: flux %v, ours %v", ka, kb)
	}
}

func manifest(t *testing.T, ref string) *v1.Manifest {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
