package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// Knowing another tenant's digest gets nothing: a request from another
// source downloads its own object, and its bytes must be the image's.
func TestACachedImageGoesOnlyToASourceThatDeliveredIt(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	ctx := context.Background()
	private := &source{object: randomImage(t, mib)}
	want := digestOf(private.object)
	h, err := c.Get(ctx, want, Source{Key: "http://minio/alice/disk key-a", Fetch: private.fetch})
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	own := &source{object: randomImage(t, mib)} // the attacker's own object, declared with alice's digest
	_, err = c.Get(ctx, want, Source{Key: "http://minio/mallory/disk key-m", Fetch: own.fetch})
	var mismatch *MismatchError
	if !errors.As(err, &mismatch) || own.calls.Load() != 1 {
		t.Fatalf("a request from another source = %v after %d downloads; want its own download refused as a mismatch", err, own.calls.Load())
	}
	// A source that really holds the bytes gets them, and so does the
	// first source again, without a download.
	copied := &source{object: private.object}
	for _, s := range []struct {
		key  string
		src  *source
		hit  bool
		want int32
	}{{"http://minio/bob/disk key-b", copied, false, 1}, {"http://minio/alice/disk key-a", private, true, 1}} {
		h, err := c.Get(ctx, want, Source{Key: s.key, Fetch: s.src.fetch})
		if err != nil || h.Hit != s.hit || s.src.calls.Load() != s.want {
			t.Fatalf("Get from %s = %+v, %v after %d downloads; want hit %v", s.key, h, err, s.src.calls.Load(), s.hit)
		}
		h.Release()
	}
	// The record of who delivered an image outlives a restart.
	again := open(t, c.dir, 0)
	if h, err := again.Get(ctx, want, Source{Key: "http://minio/bob/disk key-b", Fetch: copied.fetch}); err != nil || !h.Hit {
		t.Fatalf("after a restart, Get from a source that delivered the image = %+v, %v; want a hit", h, err)
	}
}

// A second tenant that names the first's gzip object (a copy in its own
// bucket) without the .gz suffix stores the object as it is, compressed:
// that is an entry of its own, and the first tenant's next hit still
// reads the image, decompressed, across a restart too.
func TestAnotherSuffixCannotPoisonACachedImage(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 0)
	ctx := context.Background()
	image := randomImage(t, mib)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(image); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	alice, mallory := &source{object: gz.Bytes()}, &source{object: gz.Bytes()}
	want := digestOf(gz.Bytes())
	read := func(c *Cache, key string, s *source, comp Compression) ([]byte, bool) {
		t.Helper()
		h, err := c.Get(ctx, want, Source{Key: key, Compression: comp, Fetch: s.fetch})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		data, err := os.ReadFile(h.Path)
		if err != nil {
			t.Fatal(err)
		}
		return data, h.Hit
	}
	if data, _ := read(c, "http://minio/alice/disk.raw.gz key-a", alice, Gzip); !bytes.Equal(data, image) {
		t.Fatal("alice's first read is not her image")
	}
	if data, _ := read(c, "http://minio/mallory/disk.raw key-m", mallory, Uncompressed); !bytes.Equal(data, gz.Bytes()) {
		t.Fatal("mallory's read of the object as stored is not the object")
	}
	for _, c := range []*Cache{c, open(t, dir, 0)} {
		data, hit := read(c, "http://minio/alice/disk.raw.gz key-a", alice, Gzip)
		if !hit || !bytes.Equal(data, image) {
			t.Fatalf("alice's next read: hit %v, her image %v; want a hit on her decompressed image", hit, bytes.Equal(data, image))
		}
	}
}

// A small object that decompresses without end is stopped at the
// bound, and nothing is kept.
func TestADecompressionBombStopsAtItsBound(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 0)
	var bomb bytes.Buffer
	z, err := zstd.NewWriter(&bomb, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := z.Write(make([]byte, 256*mib)); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	s := &source{object: bomb.Bytes()}
	started := time.Now()
	_, err = c.Get(context.Background(), digestOf(s.object), Source{Key: "bomb", Compression: Zstd, Fetch: s.fetch, MaxBytes: 8 * mib})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Get of a %d-byte object decompressing to 256 MiB with a bound of 8 MiB = %v after %s; want ErrTooLarge", bomb.Len(), err, time.Since(started))
	}
	if names := files(t, dir); len(names) != 0 {
		t.Fatalf("the refused download left %v", names)
	}
}

// Opening the cache removes what a crashed fill left, never a download
// another process is still writing.
func TestOpeningTheCacheSparesALiveDownload(t *testing.T) {
	dir := t.TempDir()
	live, err := os.Create(filepath.Join(dir, tempPrefix+"live"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := unix.Flock(int(live.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"crashed"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, dir, 0)
	if names := strings.Join(files(t, dir), " "); names != tempPrefix+"live" {
		t.Fatalf("after Open the cache holds %q; want only the live download", names)
	}
}
