package bucket_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/images/bucket"
)

func TestImagesAndChecksumsAreRead(t *testing.T) {
	m := testenv.StartMinIO(t)
	image := make([]byte, 3<<20)
	_, _ = rand.Read(image)
	objects := testenv.WithChecksums(map[string][]byte{"vm/debian.qcow2": image})
	objects["vm/bare.raw"] = []byte("no checksum")
	m.Put(t, "images", objects)
	line := string(objects["vm/debian.qcow2.sha256"])
	b, err := bucket.Open(bucket.Options{Endpoint: m.Endpoint, Bucket: "images", AccessKey: m.AccessKey, SecretKey: m.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got bytes.Buffer
	if err := b.Copy(ctx, "vm/debian.qcow2", &got); err != nil || !bytes.Equal(got.Bytes(), image) {
		t.Fatalf("Copy = %d bytes, %v; want the image's %d", got.Len(), err, len(image))
	}
	if size, err := b.Size(ctx, "vm/debian.qcow2"); err != nil || size != int64(len(image)) {
		t.Fatalf("Size = %d, %v", size, err)
	}
	if text, err := b.DeclaredChecksum(ctx, "vm/debian.qcow2"); err != nil || text != line {
		t.Fatalf("DeclaredChecksum = %q, %v; want %q", text, err, line)
	}
	_, err = b.DeclaredChecksum(ctx, "vm/bare.raw")
	if !errors.Is(err, bucket.ErrNoChecksum) || !strings.Contains(err.Error(), "images/vm/bare.raw.sha256") {
		t.Fatalf("a missing checksum: %v; want ErrNoChecksum naming the object", err)
	}
	if err := b.Copy(ctx, "vm/missing.qcow2", &got); err == nil || !strings.Contains(err.Error(), "images/vm/missing.qcow2") {
		t.Fatalf("a missing image: %v; want an error naming it", err)
	}
}

func TestWrongCredentialsAreRefused(t *testing.T) {
	m := testenv.StartMinIO(t)
	m.Put(t, "images", map[string][]byte{"a.raw": []byte("data")})
	b, err := bucket.Open(bucket.Options{Endpoint: m.Endpoint, Bucket: "images", AccessKey: m.AccessKey, SecretKey: "wrong-secret-key"})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := b.Copy(context.Background(), "a.raw", &got); err == nil || got.Len() != 0 {
		t.Fatalf("wrong credentials read %d bytes (%v)", got.Len(), err)
	}
}

func TestBadOptionsAreRefused(t *testing.T) {
	for _, o := range []bucket.Options{{Endpoint: "minio:9000", Bucket: "images"}, {Endpoint: "http://minio:9000"}} {
		if _, err := bucket.Open(o); err == nil {
			t.Errorf("Open(%+v) took it", o)
		}
	}
}
