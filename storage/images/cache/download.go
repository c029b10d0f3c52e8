package cache

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/atomicfile"
)

// Compression is how an image object is compressed.
type Compression string

const (
	Uncompressed Compression = ""
	Gzip         Compression = "gzip"
	Zstd         Compression = "zstd"
	Xz           Compression = "xz"
)

// CompressionOf is the compression an object's name says: .gz, .zst or
// .xz; anything else is taken as uncompressed.
func CompressionOf(object string) Compression {
	switch {
	case strings.HasSuffix(object, ".gz"):
		return Gzip
	case strings.HasSuffix(object, ".zst"):
		return Zstd
	case strings.HasSuffix(object, ".xz"):
		return Xz
	}
	return Uncompressed
}

// MismatchError is a download whose bytes are not the ones the source
// declared: nothing of it is cached.
type MismatchError struct{ Want, Got Digest }

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the downloaded image is %s, %s %s: nothing was cached; check the object and its digest", e.Got, mismatchPhrase, e.Want)
}

// mismatchPhrase is in every MismatchError's text, so that a process
// that sees only the text (a populator pod's termination message) can
// tell this failure from others.
const mismatchPhrase = "but its source declares"

// MismatchIn reports whether text holds a MismatchError's.
func MismatchIn(text string) bool { return strings.Contains(text, mismatchPhrase) }

// download fills a temporary file, locked against removal by another
// process's Open while it is written, with the object's decompressed
// bytes, checks the object's digest, and renames the file into place
// once it is synced. It returns the entry's size.
func (c *Cache) download(ctx context.Context, at entryKey, src Source, bound int64) (size int64, err error) {
	want := at.digest
	tmp, err := c.lockedTemp(want)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	got, size, err := copyVerified(ctx, tmp, src, bound)
	if err != nil {
		return 0, err
	}
	if got != want {
		return 0, &MismatchError{Want: want, Got: got}
	}
	if err := tmp.Sync(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), c.path(at)); err != nil {
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	return size, atomicfile.SyncDir(c.dir)
}

// lockedTemp creates a download's temporary file and locks it. Another
// process's Open may have removed it between the two: then it is made
// again.
func (c *Cache) lockedTemp(want Digest) (*os.File, error) {
	for {
		tmp, err := os.CreateTemp(c.dir, tempPrefix+want.Hex()+"-")
		if err != nil {
			return nil, fmt.Errorf("image cache %s: %w", c.dir, err)
		}
		if err := unix.Flock(int(tmp.Fd()), unix.LOCK_EX); err != nil {
			tmp.Close()
			return nil, fmt.Errorf("image cache %s: locking a download: %w", c.dir, err)
		}
		opened, err1 := tmp.Stat()
		named, err2 := os.Stat(tmp.Name())
		if err1 == nil && err2 == nil && os.SameFile(opened, named) {
			return tmp, nil
		}
		tmp.Close()
	}
}

// StallTimeout cuts a download that brings no byte for this long.
var StallTimeout = 2 * time.Minute

// ErrTooLarge is a download over its bound.
var ErrTooLarge = errors.New("the image is larger than it may be")

// copyVerified runs the source's fetch, hashing the object's bytes as
// they come and writing them decompressed to w; it returns the object's
// digest and how many bytes w got. The context's end, a stall, or more
// bytes than bound (decompressed, or downloaded) stops it at once,
// whether or not fetch heeds it: a small object that decompresses
// without end fills nothing.
func copyVerified(ctx context.Context, w io.Writer, src Source, bound int64) (Digest, int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(StallTimeout, func() {
		cancel(fmt.Errorf("no byte of the image arrived for %s", StallTimeout))
	})
	defer stall.Stop()
	hash := sha256.New()
	pr, pw := io.Pipe()
	fetched := make(chan error, 1)
	arriving := &bounded{w: io.MultiWriter(hash, pw), max: downloadBound(bound), what: "downloaded", onWrite: func() { stall.Reset(StallTimeout) }}
	go func() {
		err := src.Fetch(ctx, arriving)
		pw.CloseWithError(err) // nil: the reader sees io.EOF
		fetched <- err
	}()
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	defer stop()
	size, err := decompressTo(&bounded{w: w, max: bound, what: "decompressed"}, pr, src.Compression)
	if err == nil {
		// The whole object is hashed, whatever the decompressor left
		// unread after its stream's end.
		_, err = io.Copy(io.Discard, pr)
	}
	if err != nil {
		pr.CloseWithError(err)
		// The source's own error, if any, says more than the pipe's.
		if ferr := <-fetched; ferr != nil && !errors.Is(ferr, io.ErrClosedPipe) && !errors.Is(ferr, err) && !errors.Is(err, ErrTooLarge) {
			err = ferr
		}
		return "", 0, fmt.Errorf("downloading the image: %w", err)
	}
	if err := <-fetched; err != nil {
		return "", 0, fmt.Errorf("downloading the image: %w", err)
	}
	return Digest("sha256:" + hex.EncodeToString(hash.Sum(nil))), size, nil
}

// downloadBound is what may be downloaded for an image bounded to
// bound decompressed: a little more, for a compressor's framing of data
// that does not compress.
func downloadBound(bound int64) int64 {
	if bound == 0 {
		return 0
	}
	return bound + bound/64 + 1<<20
}

// bounded passes writes on until max bytes (0: no bound), then fails.
type bounded struct {
	w       io.Writer
	max, n  int64
	what    string
	onWrite func()
}

func (b *bounded) Write(p []byte) (int, error) {
	if b.max > 0 && b.n+int64(len(p)) > b.max {
		return 0, fmt.Errorf("%w: over %d bytes %s; the bound is the volume's size and the cache's", ErrTooLarge, b.max, b.what)
	}
	n, err := b.w.Write(p)
	b.n += int64(n)
	if b.onWrite != nil && n > 0 {
		b.onWrite()
	}
	return n, err
}

// decompressTo copies r to w, decompressed as comp says.
func decompressTo(w io.Writer, r io.Reader, comp Compression) (int64, error) {
	switch comp {
	case Uncompressed:
		return io.Copy(w, r)
	case Gzip:
		z, err := gzip.NewReader(r)
		if err != nil {
			return 0, fmt.Errorf("gzip: %w", err)
		}
		defer z.Close()
		return io.Copy(w, z)
	case Zstd:
		z, err := zstd.NewReader(r)
		if err != nil {
			return 0, fmt.Errorf("zstd: %w", err)
		}
		defer z.Close()
		return io.Copy(w, z)
	case Xz:
		z, err := xz.NewReader(r)
		if err != nil {
			return 0, fmt.Errorf("xz: %w", err)
		}
		return io.Copy(w, z)
	}
	return 0, fmt.Errorf("compression %q: use gzip, zstd, xz or none", comp)
}
