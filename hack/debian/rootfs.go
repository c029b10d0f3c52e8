package debian

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path"
	"sort"
	"strings"
	"time"
)

// Entry is one file of a root filesystem being assembled.
type Entry struct {
	hdr  tar.Header
	data []byte
}

// Rootfs is a root filesystem assembled from Debian packages' files, as
// dpkg would unpack them, without running their maintainer scripts.
type Rootfs map[string]*Entry

// Unpack adds a .deb's files (dpkg-deb --fsys-tarfile). A directory
// another package already made is kept; any other path is the later
// package's.
func (fs Rootfs) Unpack(ctx context.Context, deb string) error {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	err = fs.add(tar.NewReader(out))
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("%w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return fmt.Errorf("unpacking %s: %w", deb, err)
	}
	return nil
}

func (fs Rootfs) add(tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if name == "" || leftOut(name, hdr.Typeflag == tar.TypeDir) {
			continue
		}
		if old, ok := fs[name]; ok && old.hdr.Typeflag == tar.TypeDir && hdr.Typeflag == tar.TypeDir {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		e := &Entry{hdr: *hdr, data: data}
		e.hdr.Name = name
		if hdr.Typeflag == tar.TypeLink {
			e.hdr.Linkname = strings.TrimPrefix(path.Clean("/"+hdr.Linkname), "/")
		}
		fs[name] = e
	}
}

// leftOut is what a container never reads: documentation but for the
// licences (each package's copyright file, and the folders that hold
// them), manual pages and translations.
func leftOut(name string, dir bool) bool {
	for _, d := range []string{"usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/", "usr/share/doc-base/"} {
		if strings.HasPrefix(name, d) {
			return true
		}
	}
	return strings.HasPrefix(name, "usr/share/doc/") && !dir && path.Base(name) != "copyright"
}

// Put sets a regular file's contents, replacing what a package put there.
func (fs Rootfs) Put(name string, mode int64, data []byte) {
	fs[name] = &Entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data))}, data: data}
}

// Dir adds a directory.
func (fs Rootfs) Dir(name string, mode int64) {
	fs[name] = &Entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: mode}}
}

// Link adds a symbolic link.
func (fs Rootfs) Link(name, target string) {
	fs[name] = &Entry{hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: target}}
}

// Edit rewrites a packaged file's contents; a missing file is an error.
func (fs Rootfs) Edit(name string, change func([]byte) []byte) error {
	e, ok := fs[name]
	if !ok || e.hdr.Typeflag != tar.TypeReg {
		return fmt.Errorf("%s is not a file of the image's packages", name)
	}
	e.data = change(e.data)
	e.hdr.Size = int64(len(e.data))
	return nil
}

// Tarball writes the files as one layer: sorted by path, parents first,
// owned by root, every time at epoch, so that the same packages make the
// same bytes.
func (fs Rootfs) Tarball(epoch time.Time) ([]byte, error) {
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := fs[n]
		hdr := tar.Header{Name: n, Typeflag: e.hdr.Typeflag, Mode: e.hdr.Mode & 0o7777, Linkname: e.hdr.Linkname,
			ModTime: epoch, Format: tar.FormatPAX}
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Data is a regular file's contents.
func (e *Entry) Data() []byte { return e.data }
