// Package cosignsig reads and writes signatures in cosign's key-based
// format: a simple-signing payload that names the signed manifest's
// digest, stored as a layer of an OCI manifest tagged "sha256-<hex>.sig"
// beside it, with the payload's signature (ECDSA P-256 over its SHA-256,
// ASN.1, base64) in the layer's annotation. The release signs with it;
// OCIRepository's spec.verify checks with it. Keyless (Fulcio, Rekor)
// signatures are not read.
package cosignsig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The media type of the payload layer and the annotation of its signature.
const (
	MediaType  = "application/vnd.dev.cosign.simplesigning.v1+json"
	Annotation = "dev.cosignproject.cosign/signature"
)

// MaxPayload bounds a payload read from a registry: a real one is a few
// hundred bytes.
const MaxPayload = 64 << 10

// SimpleSigning is the payload.
type SimpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]string `json:"optional"`
}

// Payload is the simple-signing payload for digest in repository.
func Payload(repository string, digest v1.Hash) ([]byte, error) {
	var p SimpleSigning
	p.Critical.Identity.DockerReference = repository
	p.Critical.Image.DockerManifestDigest = digest.String()
	p.Critical.Type = "cosign container image signature"
	return json.Marshal(p)
}

// Tag is the tag cosign gives the signature of digest.
func Tag(digest v1.Hash) string { return digest.Algorithm + "-" + digest.Hex + ".sig" }

// Sign signs data. The signature is deterministic (RFC 6979), so that one
// input and one key give one signature.
func Sign(key *ecdsa.PrivateKey, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sig, err := key.Sign(nil, sum[:], crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyBlob checks a signature Sign made.
func VerifyBlob(pub *ecdsa.PublicKey, data []byte, signature string) error {
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return fmt.Errorf("the signature is not base64: %w", err)
	}
	sum := sha256.Sum256(data)
	if !ecdsa.VerifyASN1(pub, sum[:], sig) {
		return errors.New("the signature does not match the key")
	}
	return nil
}

// ParsePublicKey reads a PEM public key as cosign writes it (cosign.pub).
func ParsePublicKey(data []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM public key")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, and only ECDSA keys (cosign's own) are read", k)
	}
	return pub, nil
}

// ErrNoMatch says no payload of a signature manifest was signed by any of
// the keys for the digest.
var ErrNoMatch = errors.New("no signature matches the keys")

// Check checks a signature manifest: one of its payloads names digest and
// is signed by one of keys. read returns a layer's bytes, its digest
// checked, at most MaxPayload of them.
func Check(m *v1.Manifest, read func(v1.Descriptor) ([]byte, error), digest v1.Hash, keys []*ecdsa.PublicKey) error {
	last := ErrNoMatch
	for _, layer := range m.Layers {
		if layer.MediaType != MediaType {
			continue
		}
		if layer.Size > MaxPayload {
			return fmt.Errorf("a signature payload of %d bytes, over the limit of %d", layer.Size, MaxPayload)
		}
		body, err := read(layer)
		if err != nil {
			return err
		}
		var p SimpleSigning
		if err := json.Unmarshal(body, &p); err != nil {
			return fmt.Errorf("a signature payload is not simple-signing JSON: %w", err)
		}
		if p.Critical.Image.DockerManifestDigest != digest.String() {
			last = fmt.Errorf("the signature names %s, not %s", p.Critical.Image.DockerManifestDigest, digest)
			continue
		}
		for _, k := range keys {
			if last = VerifyBlob(k, body, layer.Annotations[Annotation]); last == nil {
				return nil
			}
		}
	}
	return last
}
