package main

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// A release verifies offline with its public key; one changed byte of a
// layer, of an SBOM or of the signature's payload fails, naming what, as
// does a key the release was not signed with.
func TestVerifyNamesWhatWasTamperedWith(t *testing.T) {
	dir, _ := release(t)
	pub, err := readPublicKey(filepath.Join(filepath.Dir(options(dir).Key), "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, pub); err != nil {
		t.Fatalf("the release as built: %v", err)
	}
	for _, tc := range []struct {
		name, blob, says string
	}{
		{"a layer", "layer 1 of the amd64 image of the image index strata:0.0.0-test", "layer 1 of the amd64 image of the image index strata:0.0.0-test"},
		{"a sidecar's layer", "layer 1 of the arm64 image of the image index csi-provisioner:v6.4.0", "layer 1 of the arm64 image of the image index csi-provisioner:v6.4.0"},
		{"an SBOM", "the SBOM of the arm64 image of strata:0.0.0-test", "layer 1 of an SBOM"},
		{"the signature", "the signature's payload of strata:0.0.0-test", "layer 1 of the signature of strata:0.0.0-test"},
		{"the chart", "the chart's package", "layer 1 of the chart"},
		{"the chart beside the layout", "", "strata-0.0.0-test.tgz is not the signed chart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copyDir := linkTree(t, dir)
			if tc.blob == "" {
				flipByte(t, filepath.Join(copyDir, "strata-0.0.0-test.tgz"))
			} else {
				flipByte(t, blobNamed(t, copyDir, pub, tc.blob))
			}
			err := Verify(copyDir, pub)
			if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "changed") {
				t.Fatalf("verify after %s changed: %v; want an error naming %q", tc.name, err, tc.says)
			}
		})
	}
	other, err := makeKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, &other.PublicKey); err == nil || !strings.Contains(err.Error(), "does not match the key") {
		t.Fatalf("verify with another key: %v", err)
	}
}

// blobNamed finds the path of the blob Verify calls what, by reading the
// layout as Verify does and recording the names it gives.
func blobNamed(t *testing.T, dir string, pub *ecdsa.PublicKey, what string) string {
	t.Helper()
	names := map[string]string{}
	l := &layoutReader{dir: filepath.Join(dir, "image"), seen: func(w, path string) { names[w] = path }}
	if err := l.verify(pub); err != nil {
		t.Fatal(err)
	}
	path, ok := names[what]
	if !ok {
		t.Fatalf("no blob is %q; the blobs are %v", what, names)
	}
	return path
}

// linkTree is a copy of the release made of hard links: a test changes a
// file by writing a new one in its place (flipByte), never the shared one.
func linkTree(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		return os.Link(path, filepath.Join(out, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// flipByte changes one byte of a file, written as a new file in its place.
func flipByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A blob swapped for a larger file is refused by its size, before it is
// read, naming it.
func TestABlobLargerThanItsDescriptorIsNotRead(t *testing.T) {
	dir := t.TempDir()
	data := []byte("the blob")
	sum := sha256.Sum256(data)
	d := v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Size: int64(len(data))}
	path := filepath.Join(dir, "blobs", "sha256", d.Digest.Hex)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l := &layoutReader{dir: dir}
	if _, err := l.blob(d, "layer 1 of the amd64 image"); err != nil {
		t.Fatalf("the blob as written: %v", err)
	}
	if err := os.WriteFile(path, append(data, make([]byte, 1<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.blob(d, "layer 1 of the amd64 image"); err == nil || !strings.Contains(err.Error(), "1048584 bytes, not the 8") || !strings.Contains(err.Error(), "layer 1 of the amd64 image") {
		t.Fatalf("a blob grown by 1 MiB: %v", err)
	}
}
