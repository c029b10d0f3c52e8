package artifact

import (
	"path"
	"path/filepath"
	"strings"
)

// change is what a revision changed relative to the one before it.
type change struct {
	from  string
	files []string
}

// RecordChanges notes which files changed between the artifact of revision
// from and the one with this digest, so consumers can tell which of them a
// new revision concerns. It is a hint kept in memory: consumers must treat
// an unknown digest as "anything may have changed".
func (s *Storage) RecordChanges(digest, from string, files []string) {
	s.changes.Store(digest, change{from: from, files: files})
}

// Touches reports whether the artifact with this digest may have changed
// anything under dir (a Kustomization path). Unknown digests touch
// everything.
func (s *Storage) Touches(digest, dir string) bool {
	v, ok := s.changes.Load(digest)
	return !ok || touches(v.(change).files, dir)
}

// Untouched reports whether the artifact with this digest is known to
// change nothing under dir relative to revision from.
func (s *Storage) Untouched(digest, from, dir string) bool {
	v, ok := s.changes.Load(digest)
	return ok && v.(change).from == from && !touches(v.(change).files, dir)
}

func touches(files []string, dir string) bool {
	dir = strings.Trim(path.Clean("/"+dir), "/")
	for _, f := range files {
		// A changed path above dir is a submodule that moved: all of
		// its files may have changed.
		if dir == "" || f == dir || strings.HasPrefix(f, dir+"/") || strings.HasPrefix(dir, f+"/") {
			return true
		}
	}
	return false
}

// PathIn is p as a path inside an artifact: relative to its root, slash
// separated, with ".." stopping at the root as securejoin does.
func PathIn(p string) string {
	return strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(p)), "/")
}
