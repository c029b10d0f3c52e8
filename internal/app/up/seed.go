package up

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-gitops/strata/internal/local/gitserver"
)

type repository struct {
	bare string
	work string
}

// seedRepository turns the example cluster directory into a git repository
// on first run: a bare repository served over HTTP and a work tree to edit
// and push from. Later runs keep both as they are, with their history.
func seedRepository(o Options, url string) (*repository, error) {
	name := filepath.Base(o.ClusterDir)
	r := &repository{
		bare: filepath.Join(o.StateDir, "git", name+".git"),
		work: filepath.Join(o.StateDir, "work", name),
	}
	if _, err := os.Stat(r.bare); err == nil {
		return r, pushThroughServer(r.work, url)
	}
	if err := os.MkdirAll(filepath.Dir(r.bare), 0o755); err != nil {
		return nil, err
	}
	if err := gitserver.InitBare(r.bare, "main"); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(r.work); err != nil {
		return nil, err
	}
	if err := os.CopyFS(r.work, os.DirFS(o.ClusterDir)); err != nil {
		return nil, fmt.Errorf("copying %s: %w", o.ClusterDir, err)
	}
	steps := [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.name", "strata up"},
		{"config", "user.email", "up@strata.dev"},
		{"add", "-A"},
		{"commit", "-q", "-m", "Seed from " + o.ClusterDir},
		{"remote", "add", "origin", r.bare},
		{"push", "-q", "origin", "main"},
	}
	for _, args := range steps {
		if err := git(r.work, args...); err != nil {
			return nil, err
		}
	}
	return r, pushThroughServer(r.work, url)
}

// pushThroughServer points the work tree at the served URL, so that pushes
// go through the HTTP server, which calls the Receiver, and makes it
// main's upstream, so that a plain `git push` (the printed next step)
// works; work trees seeded before that was done get it too.
func pushThroughServer(work, url string) error {
	if _, err := os.Stat(work); err != nil {
		return nil
	}
	for _, args := range [][]string{
		{"remote", "set-url", "origin", url},
		{"config", "branch.main.remote", "origin"},
		{"config", "branch.main.merge", "refs/heads/main"},
	} {
		if err := git(work, args...); err != nil {
			return err
		}
	}
	return nil
}

func git(dir string, args ...string) error {
	_, err := gitserver.Run(dir, args...)
	return err
}
