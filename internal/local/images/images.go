// Package images builds small container images from files on this
// machine (the storage e2e's agnhost and busybox shells, the pause
// program), with no Docker, and pushes them to the local cluster's
// registry. strata's own images are the release's (hack/release).
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one file of an image: a copy of a file on this machine
// (Source), given bytes (Data), or a symbolic link (Link).
type File struct {
	// Path is where the file is in the image, absolute.
	Path   string
	Source string
	Data   []byte
	Link   string
	// Mode is the file's permission bits; 0 takes the source's, or 0644.
	Mode os.FileMode
}

// Image is one image: its reference (strata.local/PATH:TAG, the nodes'
// name of the cluster's registry), what it runs, and its files. Parent directories are made as needed.
type Image struct {
	Ref        string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	Files      []File
}

// created is every image's creation time: fixed, so that the same files
// make the same image and a push of an unchanged image is a no-op.
var created = time.Unix(0, 0).UTC()

// Push pushes the images to the registry at HOST:PORT, each at its
// reference's path there: strata.local/pause:3.10 goes to
// HOST:PORT/pause:3.10.
func Push(ctx context.Context, registry string, imgs ...Image) error {
	for _, img := range imgs {
		_, repoTag, ok := strings.Cut(img.Ref, "/")
		if !ok {
			return fmt.Errorf("image %s: the reference names no registry", img.Ref)
		}
		built, err := build(img)
		if err != nil {
			return fmt.Errorf("image %s: %w", img.Ref, err)
		}
		ref, err := name.ParseReference(registry+"/"+repoTag, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, built, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	return nil
}

// build makes the image: its files in one layer, and its config.
func build(img Image) (v1.Image, error) {
	data, err := layerOf(img.Files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	out, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	out = mutate.ConfigMediaType(out, types.OCIConfigJSON)
	cfg, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", runtime.GOARCH, v1.Time{Time: created}
	cfg.Config = v1.Config{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env, WorkingDir: img.WorkingDir}
	return mutate.ConfigFile(out, cfg)
}

// layerOf is an uncompressed tar of the files, parents first, in a fixed
// order, owned by root.
func layerOf(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{"/": true}
	sorted := append([]File(nil), files...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for i, f := range sorted {
		// Two tools may be one file (mkfs.ext4 and mke2fs): the first
		// entry for a path is the one the layer holds, read once.
		if i > 0 && sorted[i-1].Path == f.Path {
			continue
		}
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("file %q: the path in the image must be absolute", f.Path)
		}
		if err := addParents(tw, path.Dir(f.Path), dirs); err != nil {
			return nil, err
		}
		if err := addFile(tw, f); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addParents(tw *tar.Writer, dir string, done map[string]bool) error {
	if done[dir] {
		return nil
	}
	if err := addParents(tw, path.Dir(dir), done); err != nil {
		return err
	}
	done[dir] = true
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o755, ModTime: created})
}

func addFile(tw *tar.Writer, f File) error {
	name := strings.TrimPrefix(f.Path, "/")
	if f.Link != "" {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: f.Link, Mode: 0o777, ModTime: created})
	}
	data, mode := f.Data, f.Mode
	if f.Source != "" {
		info, err := os.Stat(f.Source)
		if err != nil {
			return fmt.Errorf("file %s of the image: %w", f.Path, err)
		}
		if data, err = os.ReadFile(f.Source); err != nil {
			return fmt.Errorf("file %s of the image: %w", f.Path, err)
		}
		if mode == 0 {
			mode = info.Mode().Perm()
		}
	}
	if mode == 0 {
		mode = 0o644
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: int64(mode), ModTime: created}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
