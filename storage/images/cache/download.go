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

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

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
	return fmt.Sprintf("the downloaded image is %s, but its source declares %s: nothing was cached; check the object and its digest", e.Got, e.Want)
}

// download fills a temporary file with the object's decompressed bytes,
// checks the object's digest, and renames the file into place once it
// is synced. It returns the entry's size.
func (c *Cache) download(ctx context.Context, want Digest, comp Compression, fetch Fetch) (size int64, err error) {
	tmp, err := os.CreateTemp(c.dir, tempPrefix+want.Hex()+"-")
	if err != nil {
		return 0, fmt.Errorf("image cache %s: %w", c.dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	got, size, err := copyVerified(ctx, tmp, comp, fetch)
	if err != nil {
		return 0, err
	}
	if got != want {
		return 0, &MismatchError{Want: want, Got: got}
	}
	if err := tmp.Sync(); err != nil {
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), c.path(want)); err != nil {
		return 0, err
	}
	return size, atomicfile.SyncDir(c.dir)
}

// copyVerified runs fetch, hashing the object's bytes as they come and
// writing them decompressed to w; it returns the object's digest and
// how many bytes w got. The context's end stops it at once, whether or
// not fetch heeds it.
func copyVerified(ctx context.Context, w io.Writer, comp Compression, fetch Fetch) (Digest, int64, error) {
	hash := sha256.New()
	pr, pw := io.Pipe()
	fetched := make(chan error, 1)
	go func() {
		err := fetch(ctx, io.MultiWriter(hash, pw))
		pw.CloseWithError(err) // nil: the reader sees io.EOF
		fetched <- err
	}()
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	defer stop()
	size, err := decompressTo(w, pr, comp)
	if err == nil {
		// The whole object is hashed, whatever the decompressor left
		// unread after its stream's end.
		_, err = io.Copy(io.Discard, pr)
	}
	if err != nil {
		pr.CloseWithError(err)
		// The source's own error, if any, says more than the pipe's.
		if ferr := <-fetched; ferr != nil && !errors.Is(ferr, io.ErrClosedPipe) && !errors.Is(ferr, err) {
			err = ferr
		}
		return "", 0, fmt.Errorf("downloading the image: %w", err)
	}
	if err := <-fetched; err != nil {
		return "", 0, fmt.Errorf("downloading the image: %w", err)
	}
	return Digest("sha256:" + hex.EncodeToString(hash.Sum(nil))), size, nil
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
