// Package images builds the container images the local cluster runs from
// files on this machine, with no registry and no Docker: each image is one
// layer of named files, and WriteArchive writes images as one OCI image
// archive (an OCI image layout in a tar) that containerd imports.
package images

import (
	"archive/tar"
	"bytes"
	_ "crypto/sha256" // go-digest computes sha256 digests through crypto
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
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

// Image is one image: its reference (strata.local/NAME:TAG), what it
// runs, and its files. Parent directories are made as needed.
type Image struct {
	Ref        string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	Files      []File
}

// created is every image's creation time: fixed, so that the same files
// make the same image and an import of an unchanged image is a no-op.
var created = time.Unix(0, 0).UTC()

// WriteArchive writes the images as one OCI image archive. Each manifest
// carries its reference in the annotations containerd reads on import.
func WriteArchive(w io.Writer, imgs ...Image) error {
	out := tar.NewWriter(w)
	var index ocispec.Index
	index.SchemaVersion = 2
	index.MediaType = ocispec.MediaTypeImageIndex
	written := map[digest.Digest]bool{}
	blob := func(mediaType string, data []byte) (ocispec.Descriptor, error) {
		d := digest.FromBytes(data)
		desc := ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
		if written[d] {
			return desc, nil
		}
		written[d] = true
		return desc, writeEntry(out, "blobs/sha256/"+d.Encoded(), data)
	}
	for _, img := range imgs {
		desc, err := writeImage(img, blob)
		if err != nil {
			return fmt.Errorf("image %s: %w", img.Ref, err)
		}
		index.Manifests = append(index.Manifests, desc)
	}
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err := writeEntry(out, ocispec.ImageLayoutFile, layout); err != nil {
		return err
	}
	data, _ := json.Marshal(index)
	if err := writeEntry(out, "index.json", data); err != nil {
		return err
	}
	return out.Close()
}

// writeImage writes an image's layer, config and manifest as blobs and
// returns the manifest's descriptor, annotated with the reference.
func writeImage(img Image, blob func(string, []byte) (ocispec.Descriptor, error)) (ocispec.Descriptor, error) {
	layer, err := layerOf(img.Files)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layerDesc, err := blob(ocispec.MediaTypeImageLayer, layer)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	config, _ := json.Marshal(ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config:   ocispec.ImageConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env, WorkingDir: img.WorkingDir},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDesc.Digest}},
	})
	configDesc, err := blob(ocispec.MediaTypeImageConfig, config)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifest, _ := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: configDesc, Layers: []ocispec.Descriptor{layerDesc},
	})
	desc, err := blob(ocispec.MediaTypeImageManifest, manifest)
	if err != nil {
		return desc, err
	}
	_, tag, _ := strings.Cut(path.Base(img.Ref), ":")
	desc.Annotations = map[string]string{
		"io.containerd.image.name": img.Ref, // the name containerd gives the image
		ocispec.AnnotationRefName:  tag,
	}
	desc.Platform = &ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"}
	return desc, nil
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

func writeEntry(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644, ModTime: created}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
