package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// cosign's format for a signature of an image: a simple-signing payload
// naming the digest, as the layer of an OCI manifest, the signature of
// the payload's SHA-256 in the layer's annotation.
const (
	signatureMediaType  = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation = "dev.cosignproject.cosign/signature"
)

type simpleSigning struct {
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

// payload is the simple-signing payload for digest.
func payload(repository string, digest v1.Hash) ([]byte, error) {
	var p simpleSigning
	p.Critical.Identity.DockerReference = repository
	p.Critical.Image.DockerManifestDigest = digest.String()
	p.Critical.Type = "cosign container image signature"
	return json.Marshal(p)
}

// signatureTag is the name cosign gives an image's signature.
func signatureTag(digest v1.Hash) string { return digest.Algorithm + "-" + digest.Hex + ".sig" }

// sign signs the payload: ECDSA P-256 over its SHA-256, ASN.1, base64.
// The signature is deterministic (RFC 6979), so that one commit and one
// key give one release, signature included.
func sign(key *ecdsa.PrivateKey, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sig, err := key.Sign(nil, sum[:], crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// verifySignature checks a signature sign made.
func verifySignature(pub *ecdsa.PublicKey, data []byte, signature string) error {
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

// loadOrMakeKey reads the signing key (PEM, PKCS#8), or makes one with
// its public half beside it (cosign.pub) when the file is missing.
func loadOrMakeKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return makeKey(path)
	}
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s is not an ECDSA key", path)
	}
	return ec, nil
}

func makeKey(path string) (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return key, os.WriteFile(filepath.Join(filepath.Dir(path), "cosign.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// readPublicKey reads a PEM public key, as cosign.pub holds it.
func readPublicKey(path string) (*ecdsa.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM key", path)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s is not an ECDSA key", path)
	}
	return pub, nil
}
