package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Unpack reads the regular files of a tar+gzip stream into memory within
// limits: an OCI layer, a tarball another controller served. Links and devices are left out, as Flux leaves them out; a name
// that leaves the root is refused.
func Unpack(r io.Reader, limits Limits) ([]File, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	var files []File
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		name, err := CleanName(hdr.Name)
		if err != nil {
			return nil, err
		}
		if limits.File > 0 && hdr.Size > limits.File {
			return nil, fmt.Errorf("file %s is %d bytes, over the limit of %d per file", name, hdr.Size, limits.File)
		}
		if total += hdr.Size; limits.Artifact > 0 && total > limits.Artifact {
			return nil, fmt.Errorf("the files up to %s are over %d bytes, the limit per artifact", name, limits.Artifact)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return nil, err
		}
		files = append(files, MemFile(name, data, hdr.FileInfo().Mode()&0o111 != 0))
	}
}

// CleanName is a name from another party (a tar entry, a bucket key) as
// a path inside the artifact's root, or an error naming it.
func CleanName(n string) (string, error) {
	c := path.Clean(strings.TrimPrefix(n, "./"))
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return "", fmt.Errorf("entry %q is outside the artifact's root", n)
	}
	return c, nil
}

// MemFile is a file held in memory.
func MemFile(name string, data []byte, executable bool) File {
	return File{Path: name, Executable: executable, Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
}
