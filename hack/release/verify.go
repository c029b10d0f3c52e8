package main

import (
	"github.com/strata-gitops/strata/sources/cosignsig"

	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// Verify checks a release's layout offline: every blob is what its digest
// says, each image index's signature is the key's and names the index,
// and each image has an SBOM that refers to it and names the Go modules
// of the program it runs; the chart is signed, names each image by its
// index's digest, and is the package beside the layout. Each failure
// names the file and what it is. dir is the release: the layout is its
// image folder.
func Verify(dir string, pub *ecdsa.PublicKey) error {
	return (&layoutReader{dir: filepath.Join(dir, "image")}).verify(pub)
}

func (l *layoutReader) verify(pub *ecdsa.PublicKey) error {
	dir := l.dir
	top, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return err
	}
	outer, err := v1.ParseIndexManifest(bytes.NewReader(top))
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "index.json"), err)
	}
	var indexes []v1.Descriptor
	var chart *v1.Descriptor
	sigs := map[string]v1.Descriptor{}
	var sboms []v1.Descriptor
	for _, d := range outer.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex:
			indexes = append(indexes, d)
		case strings.HasPrefix(d.Annotations[refName], chartRepository+":"):
			chart = &d
		case filepath.Ext(d.Annotations[refName]) == ".sig":
			sigs[d.Annotations[refName]] = d
		default:
			sboms = append(sboms, d)
		}
	}
	if len(indexes) == 0 {
		return fmt.Errorf("%s names no image index", filepath.Join(dir, "index.json"))
	}
	for _, d := range indexes {
		if err := l.verifyIndex(d, sigs, sboms, pub); err != nil {
			return err
		}
	}
	if chart == nil {
		return fmt.Errorf("%s names no chart (%s:VERSION)", filepath.Join(dir, "index.json"), chartRepository)
	}
	return l.verifyChart(*chart, indexes, sigs, pub)
}

// verifyChart checks the chart: whole, signed, the package beside the
// layout, and naming each image the release holds by its index's digest.
func (l *layoutReader) verifyChart(d v1.Descriptor, indexes []v1.Descriptor, sigs map[string]v1.Descriptor, pub *ecdsa.PublicKey) error {
	name := d.Annotations[refName]
	m, err := l.image(d, "the chart")
	if err != nil {
		return err
	}
	if err := l.signed(d, "the chart "+name, sigs, pub); err != nil {
		return err
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != chartContentMediaType {
		return fmt.Errorf("the chart %s is not one Helm chart package", name)
	}
	tgz, err := l.blob(m.Layers[0], "the chart's package")
	if err != nil {
		return err
	}
	_, version, _ := strings.Cut(name, ":")
	beside := filepath.Join(filepath.Dir(l.dir), "strata-"+version+".tgz")
	if data, err := os.ReadFile(beside); err == nil && !bytes.Equal(data, tgz) {
		return fmt.Errorf("the chart %s is not the signed chart of the layout: it was changed", beside)
	}
	return chartNamesImages(tgz, indexes)
}

// chartNamesImages checks that the chart's values name strata's and
// strata-node's images and each CSI sidecar by the digest of the
// release's index of that name.
func chartNamesImages(tgz []byte, indexes []v1.Descriptor) error {
	values, err := fileOfChart(tgz, "strata/values.yaml")
	if err != nil {
		return err
	}
	var v struct {
		Image       struct{ Digest string }
		NodeImage   struct{ Digest string } `json:"nodeImage"`
		CSISidecars map[string]any          `json:"csiSidecars"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		return fmt.Errorf("the chart's values.yaml: %w", err)
	}
	digests := map[string]string{}
	for _, d := range indexes {
		name, _, _ := strings.Cut(d.Annotations[refName], ":")
		digests[name] = d.Digest.String()
	}
	named := map[string]string{"strata": v.Image.Digest, "strata-node": v.NodeImage.Digest}
	for value, s := range v.CSISidecars {
		if m, ok := s.(map[string]any); ok {
			n, _ := m["name"].(string)
			named[n], _ = m["digest"].(string)
			if named[n] == "" {
				return fmt.Errorf("the chart's csiSidecars.%s names no digest", value)
			}
		}
	}
	for n, digest := range named {
		if digests[n] != digest {
			return fmt.Errorf("the chart names %s by %q, but the release's index of %s is %s", n, digest, n, digests[n])
		}
	}
	return nil
}

// fileOfChart reads one file of a packaged chart.
func fileOfChart(tgz []byte, name string) ([]byte, error) {
	zr, err := gzipReader(tgz)
	if err != nil {
		return nil, fmt.Errorf("the chart's package: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the chart's package has no %s", name)
		}
		if err != nil {
			return nil, fmt.Errorf("the chart's package: %w", err)
		}
		if hdr.Name == name {
			return io.ReadAll(io.LimitReader(tr, 1<<20))
		}
	}
}

// verifyIndex checks one component's index: its images whole, its
// signature, and each image's SBOM.
func (l *layoutReader) verifyIndex(d v1.Descriptor, sigs map[string]v1.Descriptor, sboms []v1.Descriptor, pub *ecdsa.PublicKey) error {
	name := d.Annotations[refName]
	images, err := l.index(d, "the image index "+name)
	if err != nil {
		return err
	}
	if err := l.signed(d, "the image index "+name, sigs, pub); err != nil {
		return err
	}
	for _, img := range images {
		if err := l.sbomOf(name, img, sboms); err != nil {
			return err
		}
	}
	return nil
}

// layoutReader reads an OCI layout's blobs, each checked against its
// digest as it is read.
type layoutReader struct {
	dir string
	// seen, when set, is told each blob's name and path as it is read.
	seen func(what, path string)
}

func (l *layoutReader) blob(d v1.Descriptor, what string) ([]byte, error) {
	path := filepath.Join(l.dir, "blobs", d.Digest.Algorithm, d.Digest.Hex)
	if l.seen != nil {
		l.seen(what, path)
	}
	// The size the descriptor names bounds what is read: a blob swapped
	// for a larger file is refused before it is read into memory.
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", what, path, err)
	}
	if info.Size() != d.Size {
		return nil, fmt.Errorf("%s (%s) is %d bytes, not the %d its descriptor names: it was changed", what, path, info.Size(), d.Size)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", what, path, err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != d.Digest.Hex {
		return nil, fmt.Errorf("%s (%s) is not the blob its digest names: it was changed", what, path)
	}
	return data, nil
}

// index reads the image index and checks each image in it whole.
func (l *layoutReader) index(d v1.Descriptor, what string) ([]v1.Descriptor, error) {
	data, err := l.blob(d, what)
	if err != nil {
		return nil, err
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, m := range idx.Manifests {
		if _, err := l.image(m, fmt.Sprintf("the %s image of %s", m.Platform.Architecture, what)); err != nil {
			return nil, err
		}
	}
	return idx.Manifests, nil
}

// image reads a manifest and checks its config and layers.
func (l *layoutReader) image(d v1.Descriptor, what string) (*v1.Manifest, error) {
	data, err := l.blob(d, "the manifest of "+what)
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the manifest of %s: %w", what, err)
	}
	if _, err := l.blob(m.Config, "the config of "+what); err != nil {
		return nil, err
	}
	for i, layer := range m.Layers {
		if _, err := l.blob(layer, fmt.Sprintf("layer %d of %s", i+1, what)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// signed finds the signature of what d names among sigs and checks it.
func (l *layoutReader) signed(d v1.Descriptor, what string, sigs map[string]v1.Descriptor, pub *ecdsa.PublicKey) error {
	sig, ok := sigs[cosignsig.Tag(d.Digest)]
	if !ok {
		return fmt.Errorf("no signature of %s %s (%s)", what, d.Digest, cosignsig.Tag(d.Digest))
	}
	return l.signature(sig, d.Annotations[refName], d.Digest, pub)
}

// signature checks the cosign signature of the index.
func (l *layoutReader) signature(d v1.Descriptor, name string, digest v1.Hash, pub *ecdsa.PublicKey) error {
	m, err := l.image(d, "the signature of "+name)
	if err != nil {
		return err
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != cosignsig.MediaType {
		return fmt.Errorf("the signature of %s is not one simple-signing payload", name)
	}
	read := func(d v1.Descriptor) ([]byte, error) { return l.blob(d, "the signature's payload of "+name) }
	if err := cosignsig.Check(m, read, digest, []*ecdsa.PublicKey{pub}); err != nil {
		return fmt.Errorf("the signature of the image index %s: %w", name, err)
	}
	return nil
}

// sbomOf finds the SBOM that refers to the image, and checks that it
// names every Go module of the program the image runs.
func (l *layoutReader) sbomOf(name string, img v1.Descriptor, candidates []v1.Descriptor) error {
	what := fmt.Sprintf("the %s image of %s", img.Platform.Architecture, name)
	for _, c := range candidates {
		m, err := l.image(c, "an SBOM")
		if err != nil {
			return err
		}
		if m.Subject == nil || m.Subject.Digest != img.Digest || len(m.Layers) != 1 || m.Layers[0].MediaType != sbomMediaType {
			continue
		}
		doc, err := l.blob(m.Layers[0], "the SBOM of "+what)
		if err != nil {
			return err
		}
		return l.sbomNamesModules(img, doc, what)
	}
	return fmt.Errorf("%s has no SBOM referring to it", what)
}

func (l *layoutReader) sbomNamesModules(img v1.Descriptor, doc []byte, what string) error {
	var bom struct {
		Components []struct {
			PackageURL string `json:"purl"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &bom); err != nil {
		return fmt.Errorf("the SBOM of %s: %w", what, err)
	}
	named := map[string]bool{}
	for _, c := range bom.Components {
		named[c.PackageURL] = true
	}
	binary, err := l.programOf(img, what)
	if err != nil {
		return err
	}
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("the program of %s: %w", what, err)
	}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if purl := "pkg:golang/" + dep.Path + "@" + dep.Version; !named[purl] {
			return fmt.Errorf("the SBOM of %s does not name %s, which its program is built with", what, purl)
		}
	}
	return nil
}

// programOf reads the program the image runs, its entrypoint, from its
// last layer.
func (l *layoutReader) programOf(img v1.Descriptor, what string) ([]byte, error) {
	m, err := l.image(img, what)
	if err != nil {
		return nil, err
	}
	data, err := l.blob(m.Config, "the config of "+what)
	if err != nil {
		return nil, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the config of %s: %w", what, err)
	}
	if len(cfg.Config.Entrypoint) == 0 {
		return nil, fmt.Errorf("%s has no entrypoint", what)
	}
	program := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
	last := m.Layers[len(m.Layers)-1]
	data, err = l.blob(last, "the last layer of "+what)
	if err != nil {
		return nil, err
	}
	zr, err := gzipReader(data)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no %s, its entrypoint, in its last layer", what, program)
		}
		if err != nil {
			return nil, err
		}
		if hdr.Name == program {
			return io.ReadAll(tr)
		}
	}
}

func gzipReader(data []byte) (io.Reader, error) { return gzip.NewReader(bytes.NewReader(data)) }
