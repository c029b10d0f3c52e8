package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

const mib = 1 << 20

func randomImage(t *testing.T, size int) []byte {
	t.Helper()
	b := make([]byte, size)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func digestOf(b []byte) Digest {
	sum := sha256.Sum256(b)
	return Digest("sha256:" + hex.EncodeToString(sum[:]))
}

// source serves one object and counts its downloads.
type source struct {
	object []byte
	calls  atomic.Int32
	// gate, when set, holds each download after its first half until
	// it is closed.
	gate chan struct{}
}

func (s *source) fetch(ctx context.Context, w io.Writer) error {
	s.calls.Add(1)
	half := len(s.object) / 2
	if _, err := w.Write(s.object[:half]); err != nil {
		return err
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_, err := w.Write(s.object[half:])
	return err
}

func open(t *testing.T, dir string, max int64) *Cache {
	t.Helper()
	c, err := Open(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(t *testing.T, c *Cache, s *source, comp Compression) *Handle {
	t.Helper()
	h, err := c.Get(context.Background(), digestOf(s.object), Source{Key: "test", Compression: comp, Fetch: s.fetch})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// files lists what the cache's directory holds.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestAVerifiedImageIsCachedThenHit(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	s := &source{object: randomImage(t, mib)}
	first := get(t, c, s, Uncompressed)
	first.Release()
	data, err := os.ReadFile(first.Path)
	if err != nil || !bytes.Equal(data, s.object) || first.Hit {
		t.Fatalf("first Get: hit %v, %d bytes (%v); want a miss with the object's bytes", first.Hit, len(data), err)
	}
	again := get(t, c, s, Uncompressed)
	defer again.Release()
	if !again.Hit || again.Path != first.Path || s.calls.Load() != 1 {
		t.Fatalf("second Get: hit %v at %s after %d downloads; want a hit of %s and one download", again.Hit, again.Path, s.calls.Load(), first.Path)
	}
}

func TestAMismatchedDownloadCachesNothing(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 0)
	s := &source{object: randomImage(t, mib)}
	declared := digestOf([]byte("another image"))
	_, err := c.Get(context.Background(), declared, Source{Key: "test", Compression: Uncompressed, Fetch: s.fetch})
	var mismatch *MismatchError
	if !errors.As(err, &mismatch) || mismatch.Want != declared || mismatch.Got != digestOf(s.object) ||
		!strings.Contains(err.Error(), string(declared)) || !strings.Contains(err.Error(), string(digestOf(s.object))) {
		t.Fatalf("Get = %v; want a mismatch naming both digests", err)
	}
	if names := files(t, dir); len(names) != 0 || c.Has(declared) {
		t.Fatalf("after the mismatch the cache holds %v", names)
	}
}

func TestATruncatedDownloadCachesNothing(t *testing.T) {
	object := randomImage(t, mib)
	cut := func(err error) Fetch {
		return func(_ context.Context, w io.Writer) error {
			_, _ = w.Write(object[:len(object)/3])
			return err
		}
	}
	for name, fetch := range map[string]Fetch{
		"the source fails":             cut(io.ErrUnexpectedEOF),
		"the source ends early":        cut(nil),
		"the source vanishes mid-read": cut(errors.New("NoSuchKey: the object was deleted")),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, 0)
			if _, err := c.Get(context.Background(), digestOf(object), Source{Key: "test", Compression: Uncompressed, Fetch: fetch}); err == nil {
				t.Fatal("a cut download was cached")
			}
			if names := files(t, dir); len(names) != 0 {
				t.Fatalf("a cut download left %v", names)
			}
		})
	}
}

func TestCompressedImagesAreCachedDecompressed(t *testing.T) {
	image := randomImage(t, 2*mib)
	compress := map[Compression]func(io.Writer) (io.WriteCloser, error){
		Gzip: func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriter(w), nil },
		Zstd: func(w io.Writer) (io.WriteCloser, error) { return zstd.NewWriter(w) },
		Xz:   func(w io.Writer) (io.WriteCloser, error) { return xz.NewWriter(w) },
	}
	for comp, writer := range compress {
		t.Run(string(comp), func(t *testing.T) {
			var object bytes.Buffer
			z, err := writer(&object)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := z.Write(image); err != nil {
				t.Fatal(err)
			}
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			c := open(t, t.TempDir(), 0)
			h := get(t, c, &source{object: object.Bytes()}, comp)
			defer h.Release()
			data, err := os.ReadFile(h.Path)
			if err != nil || !bytes.Equal(data, image) || h.Size != int64(len(image)) {
				t.Fatalf("cached %d bytes (%v), size %d; want the %d decompressed bytes", len(data), err, h.Size, len(image))
			}
		})
	}
	if CompressionOf("images/debian.qcow2.zst") != Zstd || CompressionOf("a.raw.gz") != Gzip || CompressionOf("b.img.xz") != Xz || CompressionOf("c.qcow2") != Uncompressed {
		t.Error("CompressionOf does not read the objects' suffixes")
	}
}

func TestConcurrentGetsShareOneDownload(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	s := &source{object: randomImage(t, mib), gate: make(chan struct{})}
	const jobs = 10
	handles := make(chan *Handle, jobs)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			h, err := c.Get(context.Background(), digestOf(s.object), Source{Key: "test", Compression: Uncompressed, Fetch: s.fetch})
			if err != nil {
				t.Error(err)
				return
			}
			handles <- h
		})
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if f := c.fills[fillKey{entryKey{digestOf(s.object), Uncompressed}, "test"}]; f == nil || f.waiters != jobs {
			return fmt.Errorf("not every job waits for the download yet")
		}
		return nil
	})
	close(s.gate)
	wg.Wait()
	close(handles)
	n := 0
	for h := range handles {
		n++
		h.Release()
	}
	if n != jobs || s.calls.Load() != 1 {
		t.Fatalf("%d of %d jobs got the image from %d downloads; want all from one", n, jobs, s.calls.Load())
	}
}

func TestLeastRecentlyUsedUnheldEntriesAreEvicted(t *testing.T) {
	c := open(t, t.TempDir(), 5*mib/2) // room for two images of 1 MiB
	clock := time.Now()
	c.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	a, b, d := &source{object: randomImage(t, mib)}, &source{object: randomImage(t, mib)}, &source{object: randomImage(t, mib)}
	get(t, c, a, Uncompressed).Release()
	get(t, c, b, Uncompressed).Release()
	get(t, c, a, Uncompressed).Release() // a is used again: b is now the least recent
	get(t, c, d, Uncompressed).Release()
	if !c.Has(digestOf(a.object)) || c.Has(digestOf(b.object)) || !c.Has(digestOf(d.object)) || c.Size() != 2*mib {
		t.Fatalf("after a third image: a %v, b %v, d %v, %d bytes; want b, the least recently used, evicted",
			c.Has(digestOf(a.object)), c.Has(digestOf(b.object)), c.Has(digestOf(d.object)), c.Size())
	}

	// Held images are never evicted, even above the bound.
	held := []*Handle{get(t, c, a, Uncompressed), get(t, c, d, Uncompressed), get(t, c, b, Uncompressed)}
	for _, h := range held {
		if _, err := os.Stat(h.Path); err != nil || !c.Has(h.Digest) {
			t.Fatalf("image %s, in use, was evicted: %v", h.Digest, err)
		}
	}
	for _, h := range held {
		h.Release()
	}
	if c.Size() > 5*mib/2 {
		t.Fatalf("once released the cache still holds %d bytes, above its bound", c.Size())
	}
}

func TestACrashLeavesNoPartialEntry(t *testing.T) {
	dir := t.TempDir()
	s := &source{object: randomImage(t, mib)}
	get(t, open(t, dir, 0), s, Uncompressed).Release()
	leftover := filepath.Join(dir, tempPrefix+digestOf([]byte("x")).Hex()+"-123")
	if err := os.WriteFile(leftover, []byte("half an image"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A restart: the download a crash cut short is gone, the whole
	// entry is kept and hit.
	c := open(t, dir, 0)
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cut download %s is still there: %v", leftover, err)
	}
	if h := get(t, c, s, Uncompressed); !h.Hit || s.calls.Load() != 1 {
		t.Fatalf("after the restart: hit %v, %d downloads; want the kept entry", h.Hit, s.calls.Load())
	}
}

func TestACancelledGetStopsTheDownloadWithinASecond(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 0)
	// A source that never finishes and does not heed its context.
	endless := func(_ context.Context, w io.Writer) error {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	started := time.Now()
	_, err := c.Get(ctx, digestOf([]byte("big")), Source{Key: "test", Compression: Uncompressed, Fetch: endless})
	if !errors.Is(err, context.Canceled) || time.Since(started) > time.Second+200*time.Millisecond {
		t.Fatalf("Get = %v after %s; want it cancelled within a second", err, time.Since(started))
	}
	testenv.Eventually(t, time.Second, func() error {
		if names := files(t, dir); len(names) != 0 {
			return fmt.Errorf("the cancelled download left %v", names)
		}
		return nil
	})
}

func TestAJobThatLeavesDoesNotStopTheOthers(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	s := &source{object: randomImage(t, mib), gate: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, digestOf(s.object), Source{Key: "test", Compression: Uncompressed, Fetch: s.fetch})
		left <- err
	}()
	stays := make(chan *Handle, 1)
	go func() {
		h, err := c.Get(context.Background(), digestOf(s.object), Source{Key: "test", Compression: Uncompressed, Fetch: s.fetch})
		if err != nil {
			t.Error(err)
		}
		stays <- h
	}()
	testenv.Eventually(t, 10*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if f := c.fills[fillKey{entryKey{digestOf(s.object), Uncompressed}, "test"}]; f == nil || f.waiters != 2 {
			return fmt.Errorf("both jobs do not wait yet")
		}
		return nil
	})
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the job that left got %v", err)
	}
	close(s.gate)
	if h := <-stays; h == nil || s.calls.Load() != 1 {
		t.Fatalf("the job that stayed got %v after %d downloads; want the image from the one download", h, s.calls.Load())
	} else {
		h.Release()
	}
}

func TestDigestsAreRead(t *testing.T) {
	hexDigits := strings.Repeat("ab", 32)
	for in, want := range map[string]Digest{
		"sha256:" + hexDigits:                         Digest("sha256:" + hexDigits),
		strings.ToUpper(hexDigits) + "  debian.qcow2": Digest("sha256:" + hexDigits),
	} {
		if got, err := ParseDigest(in); err != nil || got != want {
			t.Errorf("ParseDigest(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "sha256:abc", "md5:" + hexDigits, "zz" + hexDigits[2:], "the-tenants-secret-token"} {
		_, err := ParseDigest(bad)
		if err == nil {
			t.Errorf("ParseDigest(%q) took it", bad)
		}
		// A .sha256 fetched from a bucket is not repeated: the error
		// reaches events and tenants.
		if bad != "" && err != nil && strings.Contains(err.Error(), bad) {
			t.Errorf("ParseDigest(%q) repeats what it read: %v", bad, err)
		}
	}
}
