package provision

import (
	"context"
	"io"
	"os"

	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// Filler fills one target, a file or block device, from one image: the
// digest, the verified download into the cache (or a cache hit), the
// format check, the conversion to raw, and the read-back check. Image
// jobs fill their volumes with it, and `strata image fill` a target it
// is given.
type Filler struct {
	Images Images
	Cache  *cache.Cache
	Tool   qemuimg.Tool
}

// Image names an image and what its source declares of it.
type Image struct {
	URL string
	// SHA256 is the declared digest; empty reads <object>.sha256.
	SHA256 string
	// Format is qcow2 or raw, checked against the image's header.
	Format string
	// MaxBytes bounds the image, decompressed, and its download: a job
	// bounds it by the volume it fills. 0: only the cache's bound.
	MaxBytes int64
}

// Steps hear how a fill goes; nil functions are skipped.
type Steps struct {
	// Stage is called as each stage starts.
	Stage func(Stage)
	// Total is the image object's size; Downloaded counts its bytes as
	// they arrive (none on a cache hit).
	Total      func(int64)
	Downloaded func(int64)
	// Cached says where the image is in the cache, and whether it was
	// there already.
	Cached func(path string, hit bool)
	// Target opens what to write the raw disk to, for reading and
	// writing, once the image's virtual size is known: it may refuse a
	// disk too large, and make the volume. Fill closes it.
	Target func(ctx context.Context, virtualSize int64) (*os.File, error)
}

// Fill fills the target Steps.Target names from the image.
func (f Filler) Fill(ctx context.Context, img Image, steps Steps) error {
	call(steps.Stage, CheckingCache)
	digest, err := f.Images.Digest(ctx, img.URL, img.SHA256)
	if err != nil {
		return err
	}
	call(steps.Stage, Downloading)
	total, err := f.Images.Size(ctx, img.URL)
	if err != nil {
		return err
	}
	call(steps.Total, total)
	fetch := func(ctx context.Context, w io.Writer) error {
		return f.Images.Copy(ctx, img.URL, &counter{w: w, add: func(n int64) { call(steps.Downloaded, n) }})
	}
	image, err := f.Cache.Get(ctx, digest, cache.Source{Key: f.Images.Source(img.URL), Compression: cache.CompressionOf(img.URL),
		Fetch: fetch, MaxBytes: img.MaxBytes})
	if err != nil {
		return err
	}
	defer image.Release()
	if steps.Cached != nil {
		steps.Cached(image.Path, image.Hit)
	}
	info, err := f.Tool.Inspect(ctx, image.Path, img.Format)
	if err != nil {
		return err
	}
	call(steps.Stage, CreatingVolume)
	target, err := steps.Target(ctx, info.VirtualSize)
	if err != nil {
		return err
	}
	defer target.Close()
	call(steps.Stage, Converting)
	if err := f.Tool.Convert(ctx, image.Path, info, target); err != nil {
		return err
	}
	call(steps.Stage, Finalizing)
	return f.Tool.Same(ctx, image.Path, info.Format, target)
}

func call[T any](f func(T), v T) {
	if f != nil {
		f(v)
	}
}
