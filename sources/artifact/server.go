package artifact

import (
	"net/http"
	"path"
	"path/filepath"
	"strings"
)

type fileServer struct{ root string }

// ServeHTTP serves only finished tarballs, never temporary or extracted files.
func (f *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := path.Clean("/" + r.URL.Path)
	if !strings.HasSuffix(p, ".tar.gz") || strings.Contains(p, "/.") {
		http.NotFound(w, r)
		return
	}
	http.ServeFile(w, r, filepath.Join(f.root, filepath.FromSlash(p)))
}
