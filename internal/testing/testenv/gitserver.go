package testenv

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-gitops/strata/internal/local/gitserver"
)

// GitServer serves bare repositories over git's smart HTTP protocol on
// loopback, with git's own http-backend, so tests fetch exactly as from a
// real forge. Set Username/Password or Token to require credentials.
type GitServer struct {
	URL      string
	Root     string
	Username string
	Password string
	Token    string
}

// NewGitServer starts a server on loopback that stops with the test.
func NewGitServer(t testing.TB) *GitServer { return NewGitServerOn(t, "127.0.0.1") }

// NewGitServerOn starts a server on the address ip, e.g. the host's
// address on the local cluster's network, which its pods reach.
func NewGitServerOn(t testing.TB, ip string) *GitServer {
	t.Helper()
	s := &GitServer{Root: t.TempDir()}
	backend, err := gitserver.Handler(s.Root, nil)
	if err != nil {
		Unavailable(t, err.Error())
	}
	srv := httptest.NewUnstartedServer(s.authenticate(backend))
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *GitServer) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.Token != "":
			if r.Header.Get("Authorization") != "Bearer "+s.Token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		case s.Username != "":
			u, p, ok := r.BasicAuth()
			if !ok || u != s.Username || p != s.Password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Repo is a bare repository on the server and a work tree that pushes to it.
type Repo struct {
	URL  string
	Bare string
	Work string
	t    testing.TB
}

// NewRepo creates an empty repository named name (served at URL/name.git).
func (s *GitServer) NewRepo(t testing.TB, name string) *Repo {
	t.Helper()
	r := &Repo{URL: s.URL + "/" + name + ".git", Bare: filepath.Join(s.Root, name+".git"), Work: t.TempDir(), t: t}
	if err := gitserver.InitBare(r.Bare, "main"); err != nil {
		t.Fatal(err)
	}
	r.git(r.Work, "init", "-q", "-b", "main")
	r.git(r.Work, "config", "user.email", "test@strata.dev")
	r.git(r.Work, "config", "user.name", "strata test")
	r.git(r.Work, "remote", "add", "origin", r.Bare)
	return r
}

// Write writes files (path -> content) into the work tree.
func (r *Repo) Write(files map[string]string) {
	r.t.Helper()
	for path, content := range files {
		full := filepath.Join(r.Work, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// Remove deletes paths from the work tree.
func (r *Repo) Remove(paths ...string) {
	r.t.Helper()
	for _, p := range paths {
		if err := os.RemoveAll(filepath.Join(r.Work, p)); err != nil {
			r.t.Fatal(err)
		}
	}
}

// Commit commits everything in the work tree and returns the commit hash.
func (r *Repo) Commit(message string) string {
	r.t.Helper()
	r.git(r.Work, "add", "-A")
	r.git(r.Work, "commit", "-q", "--allow-empty", "-m", message)
	return r.git(r.Work, "rev-parse", "HEAD")
}

// Push pushes refs (default: main) to the served repository.
func (r *Repo) Push(refs ...string) {
	r.t.Helper()
	if len(refs) == 0 {
		refs = []string{"main"}
	}
	r.git(r.Work, append([]string{"push", "-q", "-f", "origin"}, refs...)...)
}

// CommitAndPush writes files, commits and pushes main, returning the hash.
func (r *Repo) CommitAndPush(message string, files map[string]string) string {
	r.t.Helper()
	r.Write(files)
	hash := r.Commit(message)
	r.Push()
	return hash
}

// Git runs a git command in the work tree and returns its trimmed output.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return r.git(r.Work, args...)
}

func (r *Repo) git(dir string, args ...string) string {
	r.t.Helper()
	out, err := gitserver.Run(dir, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}
