package artifact

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"io"
	"os"
	"strconv"
	"sync"
)

// A tarball is written as a run of gzip members, each holding the tar
// records of a run of files, then one holding tar's end-of-archive
// marker. Readers see one gzip stream (gzip's multi-member format, which
// Go, GNU tar and Flux's controllers read whole). A member's bytes depend
// on its files alone, so the next Store of a source copies from the
// previous tarball each member whose files did not change, instead of
// reading and compressing them again: a push that changes one file of
// thousands compresses one member.

const (
	// splitEvery makes a member end, on average, every splitEvery files:
	// at a file whose path hashes to a multiple of it, so that adding or
	// removing a file moves only the boundaries of its own member.
	splitEvery = 32
	// maxMemberFiles bounds a member where the paths happen not to split.
	maxMemberFiles = 256
)

// run is the files of one member, and what identifies their content;
// empty when a file's content has no identity (File.Key).
type run struct {
	files []File
	key   string
}

// runsOf splits files, in path order, into members.
func runsOf(files []File) []run {
	var runs []run
	var cur []File
	for i, f := range files {
		if i > 0 && (splitsAt(f.Path) || len(cur) == maxMemberFiles) {
			runs = append(runs, run{files: cur, key: keyOf(cur)})
			cur = nil
		}
		cur = append(cur, f)
	}
	if len(cur) > 0 {
		runs = append(runs, run{files: cur, key: keyOf(cur)})
	}
	return runs
}

// splitsAt says whether a member starts at path: one path in splitEvery,
// by a hash whose every bit depends on the whole path, so that paths that
// differ in a few characters split independently.
func splitsAt(path string) bool {
	h := fnv.New64a()
	_, _ = io.WriteString(h, path)
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x%splitEvery == 0
}

// keyOf identifies the content of files: their paths, modes and keys.
func keyOf(files []File) string {
	h := sha256.New()
	for _, f := range files {
		if f.Key == "" {
			return ""
		}
		_, _ = io.WriteString(h, f.Path+"\x00"+f.Key+"\x00"+strconv.FormatBool(f.Executable)+"\x00")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// member is one member of a stored tarball: where it is, and what each of
// its files holds.
type member struct {
	offset, length int64
	files          []memberFile
}

type memberFile struct {
	sum  fileSum
	size int64
}

// members are the members of one stored tarball, by key.
type members struct {
	tarball string
	byKey   map[string]member
}

// lastMembers holds, by source directory, the members of the tarball
// written last: the ones the next Store may copy. Kept in memory only,
// so only what this process wrote is copied.
type lastMembers struct{ m sync.Map }

func (l *lastMembers) of(dir string) *members {
	v, _ := l.m.Load(dir)
	m, _ := v.(*members)
	return m
}

func (l *lastMembers) keep(dir string, m *members) { l.m.Store(dir, m) }

func (l *lastMembers) forget(dir string) { l.m.Delete(dir) }

// tarballWriter writes the members of one tarball.
type tarballWriter struct {
	out  *countingWriter
	tree *treeWriter
	b    *budget
	// from is the previous tarball of the source, to copy members from;
	// nil when there is none.
	from      *os.File
	fromIndex *members
	written   map[string]member
	// gz compresses every member in turn: a compressor is large to make.
	gz *gzip.Writer
}

// startMember starts a new gzip member on the output.
func (w *tarballWriter) startMember() (*gzip.Writer, error) {
	if w.gz == nil {
		// Speed over size: the tarball stays on local disk and loopback.
		gz, err := gzip.NewWriterLevel(w.out, gzip.BestSpeed)
		w.gz = gz
		return gz, err
	}
	w.gz.Reset(w.out)
	return w.gz, nil
}

// write writes the members of runs, then the end of the archive.
func (w *tarballWriter) write(runs []run) error {
	for _, r := range runs {
		start := w.out.n
		files, err := w.copied(r)
		if files == nil && err == nil {
			files, err = w.compressed(r.files)
		}
		if err != nil {
			return err
		}
		if r.key != "" {
			w.written[r.key] = member{offset: start, length: w.out.n - start, files: files}
		}
	}
	gz, err := w.startMember()
	if err != nil {
		return err
	}
	if err := tar.NewWriter(gz).Close(); err != nil {
		return err
	}
	return gz.Close()
}

// copied copies r's member from the previous tarball, and hands its files
// to the tree by their sums: a file is read only when the recycled tree
// holds something else. It returns nil, and no error, when the previous
// tarball has no such member or cannot be read: r is compressed then.
func (w *tarballWriter) copied(r run) ([]memberFile, error) {
	old, ok := w.fromIndex.member(r.key)
	if !ok || w.from == nil {
		return nil, nil
	}
	data := make([]byte, old.length)
	if _, err := w.from.ReadAt(data, old.offset); err != nil {
		return nil, nil
	}
	if _, err := w.out.Write(data); err != nil {
		return nil, err
	}
	for i, f := range r.files {
		if err := w.b.take(f.Path, old.files[i].size); err != nil {
			return nil, err
		}
		if err := w.tree.addKnown(f.Path, old.files[i].sum, func() ([]byte, error) { return readFile(f, w.b) }); err != nil {
			return nil, err
		}
	}
	return old.files, nil
}

func (m *members) member(key string) (member, bool) {
	if m == nil || key == "" {
		return member{}, false
	}
	old, ok := m.byKey[key]
	return old, ok
}

// compressed writes files as a member of their own.
func (w *tarballWriter) compressed(files []File) ([]memberFile, error) {
	gz, err := w.startMember()
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	out := make([]memberFile, len(files))
	for i, f := range files {
		if out[i], err = addFile(tw, f, w.tree, w.b); err != nil {
			return nil, err
		}
	}
	// Flush pads the last file; the end-of-archive marker is written once,
	// after every member.
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	return out, gz.Close()
}
