package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// maxSubmoduleDepth bounds submodules of submodules, as a guard against a
// loop of repositories that include each other.
const maxSubmoduleDepth = 8

// submodules fetches, for spec.recurseSubmodules, the commits a commit's
// submodules point at, recursively, each into a mirror of its own beside
// the GitRepository's, with the GitRepository's credentials, as Flux does.
type submodules struct {
	dir     string // where the submodules' mirrors are
	auth    transport.AuthMethod
	mirrors []*mirror
}

// close closes the mirrors, once the files read from them are stored.
func (s *submodules) close() {
	for _, m := range s.mirrors {
		m.close()
	}
}

// files lists the files of commit's submodules at their paths in the
// artifact, those of their own submodules included.
func (s *submodules) files(ctx context.Context, commit *object.Commit, prefix, parentURL string, depth int) ([]artifact.File, error) {
	tree, err := commit.Tree()
	if err != nil {
		return nil, err
	}
	links, err := gittree.Submodules(tree)
	if err != nil || len(links) == 0 {
		return nil, err
	}
	if depth >= maxSubmoduleDepth {
		return nil, fmt.Errorf("submodules nest deeper than %d levels at '%s': check for repositories that include each other", maxSubmoduleDepth, prefix)
	}
	modules, err := readModules(tree)
	if err != nil {
		return nil, fmt.Errorf("reading .gitmodules%s: %w", at(prefix), err)
	}
	var out []artifact.File
	// In path order, so that a failure names the same submodule every
	// time and the status does not change between retries.
	for _, p := range slices.Sorted(maps.Keys(links)) {
		hash := links[p]
		sub, ok := modules[p]
		if !ok {
			return nil, fmt.Errorf("submodule '%s' has no entry in .gitmodules%s: add one or remove the submodule", path.Join(prefix, p), at(prefix))
		}
		subURL, err := resolveURL(parentURL, sub.URL)
		if err != nil {
			return nil, fmt.Errorf("submodule '%s': %w", path.Join(prefix, p), err)
		}
		c, err := s.fetch(ctx, subURL, hash)
		if err != nil {
			return nil, fmt.Errorf("submodule '%s' at %s from '%s': %w", path.Join(prefix, p), hash, Redact(subURL), err)
		}
		tree, err := c.Tree()
		if err != nil {
			return nil, err
		}
		files, err := gittree.AllFiles(tree, path.Join(prefix, p))
		if err != nil {
			return nil, err
		}
		nested, err := s.files(ctx, c, path.Join(prefix, p), subURL, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(append(out, files...), nested...)
	}
	return out, nil
}

func at(prefix string) string {
	if prefix == "" {
		return ""
	}
	return " of submodule '" + prefix + "'"
}

// fetch brings the commit hash of the repository at url into its mirror:
// its branches and tags are fetched when the mirror lacks it.
func (s *submodules) fetch(ctx context.Context, url string, hash plumbing.Hash) (*object.Commit, error) {
	sum := sha256.Sum256([]byte(url))
	m, err := openMirror(filepath.Join(s.dir, hex.EncodeToString(sum[:8])), url)
	if err != nil {
		return nil, err
	}
	s.mirrors = append(s.mirrors, m)
	if c, err := m.repo.CommitObject(hash); err == nil {
		return c, nil
	}
	err = m.repo.FetchContext(ctx, &gogit.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"},
		Auth:       s.auth,
		Tags:       gogit.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil, err
	}
	c, err := m.repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("the commit is on no branch or tag of the remote: push it: %w", err)
	}
	return c, nil
}

// readModules reads a tree's .gitmodules, by submodule path.
func readModules(tree *object.Tree) (map[string]*config.Submodule, error) {
	f, err := tree.File(".gitmodules")
	if err != nil {
		return nil, err
	}
	text, err := f.Contents()
	if err != nil {
		return nil, err
	}
	modules := config.NewModules()
	if err := modules.Unmarshal([]byte(text)); err != nil {
		return nil, err
	}
	byPath := map[string]*config.Submodule{}
	for _, m := range modules.Submodules {
		byPath[path.Clean(m.Path)] = m
	}
	return byPath, nil
}

// resolveURL resolves a submodule URL that is relative (./ or ../) to the
// URL of the repository that names it, as git does.
func resolveURL(parent, sub string) (string, error) {
	if !strings.HasPrefix(sub, "./") && !strings.HasPrefix(sub, "../") {
		return sub, nil
	}
	base, err := url.Parse(strings.TrimSuffix(parent, "/") + "/")
	if err != nil {
		return "", fmt.Errorf("resolving relative URL '%s' against '%s': %w", sub, Redact(parent), err)
	}
	ref, err := url.Parse(sub)
	if err != nil {
		return "", err
	}
	return base.ResolveReference(ref).String(), nil
}
