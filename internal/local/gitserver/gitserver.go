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

	"github.com/strata-gitops/strata/internal/httpserver"
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
		rec := httpserver.NewStatusRecorder(w)
		backend.ServeHTTP(rec, r)
		if repo, ok := strings.CutSuffix(r.URL.Path, "/git-receive-pack"); ok && r.Method == http.MethodPost && rec.Status == http.StatusOK {
			onPush(strings.TrimPrefix(repo, "/"))
		}
	}), nil
}

// InitBare creates a bare repository that accepts pushes over HTTP.
func InitBare(path, branch string) error {
	if _, err := Run("", "init", "-q", "--bare", "-b", branch, path); err != nil {
		return err
	}
	_, err := Run(path, "config", "http.receivepack", "true")
	return err
}

// Run runs git in dir and returns its trimmed output; the error carries
// the command, the directory and what git printed.
func Run(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s (in %q): %v: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
