// Package imagefill is `strata image fill`: one image, verified and
// cached on the node, written raw onto a file, a block device, or a
// volume's directory as disk.raw, with no agent in between. The volume
// populator's pods run it (docs/images.md); so may a person at a node.
package imagefill

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// Options say what to fill from where.
type Options struct {
	Image provision.Image
	// Target is an existing file or block device, at least the image's
	// disk; or a directory, in which the disk is the sparse file
	// disk.raw of the image's size.
	Target string
	// CacheDir and CacheBytes are the node's image cache and its bound.
	CacheDir   string
	CacheBytes int64
	// AccessKey and SecretKey sign the bucket's requests; empty reads it
	// anonymously.
	AccessKey, SecretKey string
	// Endpoints are the S3 endpoints the image may come from
	// (provision.BucketImages).
	Endpoints []string
}

// Fill fills the target and tells out each stage.
func Fill(ctx context.Context, o Options, out io.Writer) error {
	c, err := cache.Open(o.CacheDir, o.CacheBytes)
	if err != nil {
		return err
	}
	f := provision.Filler{Images: provision.BucketImages{AccessKey: o.AccessKey, SecretKey: o.SecretKey, Endpoints: o.Endpoints}, Cache: c, Tool: qemuimg.New()}
	start := time.Now()
	var target *os.File
	err = f.Fill(ctx, o.Image, provision.Steps{
		Stage: func(s provision.Stage) { fmt.Fprintf(out, "%s (%s)\n", s, time.Since(start).Round(time.Millisecond)) },
		Cached: func(path string, hit bool) {
			if hit {
				fmt.Fprintf(out, "found in the cache: %s\n", path)
			}
		},
		Target: func(_ context.Context, virtualSize int64) (*os.File, error) {
			var terr error
			target, terr = targetFor(o.Target, virtualSize)
			return target, terr
		},
	})
	if err != nil {
		return fmt.Errorf("filling %s from %s: %w", o.Target, o.Image.URL, err)
	}
	fmt.Fprintf(out, "filled %s from %s, checked (%s)\n", target.Name(), o.Image.URL, time.Since(start).Round(time.Millisecond))
	return nil
}

// DiskFile is the disk's file in a target directory.
const DiskFile = provision.DiskFile

// targetFor opens the file or device to write: the path itself (the
// operator's own argument), or disk.raw in a directory, which may be a
// tenant's volume and is opened as the agents open it (OpenDisk), made
// sparse at the disk's size.
func targetFor(path string, size int64) (*os.File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("the target: %w", err)
	}
	if !info.IsDir() {
		return os.OpenFile(path, os.O_RDWR, 0)
	}
	return provision.OpenDisk(path, size)
}
