package artifact

import (
	"path"
	"strings"
)

// RecordChanges notes which files changed between an object's previous
// artifact and the one with this digest, so consumers can tell which of
// them a new revision concerns. It is a hint kept in memory: consumers must
// treat an unknown digest as "anything may have changed".
func (s *Storage) RecordChanges(digest string, files []string) {
	s.changes.Store(digest, files)
}

// Touches reports whether the artifact with this digest changed anything
// under dir (a Kustomization path). Unknown digests touch everything.
func (s *Storage) Touches(digest, dir string) bool {
	v, ok := s.changes.Load(digest)
	if !ok {
		return true
	}
	dir = strings.Trim(path.Clean("/"+dir), "/")
	for _, f := range v.([]string) {
		if dir == "" || f == dir || strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}
