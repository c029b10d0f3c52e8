package artifact

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
)

// writeTarball writes files in the artifact's format, a gzipped tar of
// regular files with fixed headers, in members (members.go), and hands
// each file to tree as well. from is the previous tarball of the source,
// whose members it copies where their files are unchanged; nil for none.
// It returns the compressed size and the members written.
func writeTarball(w io.Writer, files []File, tree *treeWriter, b *budget, from *members) (int64, map[string]member, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	tw := &tarballWriter{out: &countingWriter{w: w}, tree: tree, b: b, fromIndex: from, written: map[string]member{}}
	if from != nil {
		if f, err := os.Open(from.tarball); err == nil {
			defer f.Close()
			tw.from = f
		}
	}
	if err := tw.write(runsOf(files)); err != nil {
		return 0, nil, err
	}
	return tw.out.n, tw.written, nil
}

// addFile writes f's tar records and hands it to tree.
func addFile(tw *tar.Writer, f File, tree *treeWriter, b *budget) (memberFile, error) {
	data, err := readFile(f, b)
	if err != nil {
		return memberFile{}, err
	}
	if err := b.take(f.Path, int64(len(data))); err != nil {
		return memberFile{}, err
	}
	mode := int64(0o644)
	if f.Executable {
		mode = 0o755
	}
	// Fixed header fields keep the digest a function of content alone.
	hdr := &tar.Header{Name: f.Path, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return memberFile{}, err
	}
	if _, err := tw.Write(data); err != nil {
		return memberFile{}, err
	}
	sum := sumOf(data, os.FileMode(mode))
	return memberFile{sum: sum, size: int64(len(data))}, tree.addKnown(f.Path, sum, func() ([]byte, error) { return data, nil })
}

// readFile reads f, within the budget's limit per file.
func readFile(f File, b *budget) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Path, err)
	}
	defer r.Close()
	data, err := readLimited(r, b.File)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Path, err)
	}
	return data, nil
}

// readLimited reads all of r, but never more than one byte past limit:
// enough to tell that it is over.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit <= 0 {
		return io.ReadAll(r)
	}
	return io.ReadAll(io.LimitReader(r, limit+1))
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// verifyDigest checks a tarball against its "sha256:<hex>" digest.
func verifyDigest(tarball, digest string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(hash.Sum(nil)); got != digest {
		return fmt.Errorf("its content has digest %s, not %s", got, digest)
	}
	return nil
}

func extract(tarball, dest string, b *budget) (manifest, error) {
	tree := newTreeWriter(dest)
	if err := eachFile(tarball, b, tree.add); err != nil {
		_ = tree.wait()
		return nil, err
	}
	return tree.out, tree.wait()
}

// manifestOf lists what the tree extracted from tarball holds, without
// writing anything.
func manifestOf(tarball string, limits Limits) (manifest, error) {
	m := manifest{}
	err := eachFile(tarball, &budget{Limits: limits}, func(name string, data []byte, mode os.FileMode) error {
		m[name] = sumOf(data, mode)
		return nil
	})
	return m, err
}

// eachFile calls add for every regular file of tarball, within the budget.
func eachFile(tarball string, b *budget, add func(name string, data []byte, mode os.FileMode) error) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err == nil && hdr.Typeflag == tar.TypeReg {
			err = b.take(hdr.Name, hdr.Size)
		}
		if err == nil && hdr.Typeflag == tar.TypeReg {
			var data []byte
			if data, err = readLimited(tr, b.File); err == nil {
				err = add(hdr.Name, data, os.FileMode(hdr.Mode)&0o755)
			}
		}
		if err != nil {
			return err
		}
	}
}
