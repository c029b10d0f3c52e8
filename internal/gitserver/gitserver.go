// Package gitserver serves bare repositories over git's smart HTTP protocol
// with git's own http-backend, for tests and for `strata up`: Flux's
// GitRepository accepts only http(s) and ssh URLs, never file://.
package gitserver

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
)

// Handler serves every repository under root. onPush, when set, is called
// with the repository path after each successful push.
func Handler(root string, onPush func(repo string)) (http.Handler, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git is not installed (needed to serve repositories): %w", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	if onPush == nil {
		return backend, nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		backend.ServeHTTP(rec, r)
		if repo, ok := strings.CutSuffix(r.URL.Path, "/git-receive-pack"); ok && r.Method == http.MethodPost && rec.status == http.StatusOK {
			onPush(strings.TrimPrefix(repo, "/"))
		}
	}), nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush lets git's streamed responses through.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// InitBare creates a bare repository that accepts pushes over HTTP.
func InitBare(path, branch string) error {
	if out, err := exec.Command("git", "init", "-q", "--bare", "-b", branch, path).CombinedOutput(); err != nil {
		return fmt.Errorf("git init %s: %v: %s", path, err, out)
	}
	if out, err := exec.Command("git", "-C", path, "config", "http.receivepack", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("git config in %s: %v: %s", path, err, out)
	}
	return nil
}
