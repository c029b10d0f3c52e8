package main

import (
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

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Verify checks a release's layout offline: every blob is what its digest
// says, the index's signature is the key's and names the index, and each
// image has an SBOM that refers to it and names the Go modules of the
// strata binary it holds. Each failure names the file and what it is.
func Verify(dir string, pub *ecdsa.PublicKey) error {
	return (&layoutReader{dir: dir}).verify(pub)
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
	var release *v1.Descriptor
	sigs := map[string]v1.Descriptor{}
	var sboms []v1.Descriptor
	for _, d := range outer.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex:
			release = &d
		case filepath.Ext(d.Annotations[refName]) == ".sig":
			sigs[d.Annotations[refName]] = d
		default:
			sboms = append(sboms, d)
		}
	}
	if release == nil {
		return fmt.Errorf("%s names no image index", filepath.Join(dir, "index.json"))
	}
	images, err := l.index(*release, "the release's image index")
	if err != nil {
		return err
	}
	sig, ok := sigs[signatureTag(release.Digest)]
	if !ok {
		return fmt.Errorf("no signature of the image index %s (%s)", release.Digest, signatureTag(release.Digest))
	}
	if err := l.signature(sig, release.Digest, pub); err != nil {
		return err
	}
	for _, img := range images {
		if err := l.sbomOf(img, sboms); err != nil {
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
		if _, err := l.image(m, fmt.Sprintf("the %s image", m.Platform.Architecture)); err != nil {
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

// signature checks the cosign signature of the index.
func (l *layoutReader) signature(d v1.Descriptor, digest v1.Hash, pub *ecdsa.PublicKey) error {
	m, err := l.image(d, "the signature")
	if err != nil {
		return err
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != signatureMediaType {
		return errors.New("the signature is not one simple-signing payload")
	}
	body, err := l.blob(m.Layers[0], "the signature's payload")
	if err != nil {
		return err
	}
	var p simpleSigning
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("the signature's payload: %w", err)
	}
	if p.Critical.Image.DockerManifestDigest != digest.String() {
		return fmt.Errorf("the signature names %s, not the image index %s", p.Critical.Image.DockerManifestDigest, digest)
	}
	if err := verifySignature(pub, body, m.Layers[0].Annotations[signatureAnnotation]); err != nil {
		return fmt.Errorf("the signature of the image index: %w", err)
	}
	return nil
}

// sbomOf finds the SBOM that refers to the image, and checks that it
// names every Go module of the strata binary in the image.
func (l *layoutReader) sbomOf(img v1.Descriptor, candidates []v1.Descriptor) error {
	what := fmt.Sprintf("the %s image", img.Platform.Architecture)
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
	binary, err := l.strataOf(img, what)
	if err != nil {
		return err
	}
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("strata in %s: %w", what, err)
	}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if purl := "pkg:golang/" + dep.Path + "@" + dep.Version; !named[purl] {
			return fmt.Errorf("the SBOM of %s does not name %s, which strata in it is built with", what, purl)
		}
	}
	return nil
}

// strataOf reads /usr/local/bin/strata from the image's last layer.
func (l *layoutReader) strataOf(img v1.Descriptor, what string) ([]byte, error) {
	m, err := l.image(img, what)
	if err != nil {
		return nil, err
	}
	last := m.Layers[len(m.Layers)-1]
	data, err := l.blob(last, "strata's layer of "+what)
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
			return nil, fmt.Errorf("%s has no usr/local/bin/strata in its last layer", what)
		}
		if err != nil {
			return nil, err
		}
		if hdr.Name == "usr/local/bin/strata" {
			return io.ReadAll(tr)
		}
	}
}

func gzipReader(data []byte) (io.Reader, error) { return gzip.NewReader(bytes.NewReader(data)) }
