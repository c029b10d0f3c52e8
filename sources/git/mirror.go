package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// mirror is a bare repository on local disk that holds everything fetched
// for one GitRepository, so that each interval fetches only new objects.
type mirror struct {
	repo  *gogit.Repository
	dir   string
	store *filesystem.Storage
}

const remoteName = "origin"

// openMirror opens the bare mirror at dir, creating it on first use, and
// points its remote at url (a GitRepository's URL may change).
// Pack files stay open until close: go-git otherwise opens the pack again
// for every object it reads, which made archiving a 4000-file tree take
// most of a second.
func openMirror(dir, url string) (*mirror, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	store := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	repo, err := gogit.Open(store, nil)
	if errors.Is(err, gogit.ErrRepositoryNotExists) {
		repo, err = gogit.Init(store, nil)
	}
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("opening local mirror %s: %w", dir, err)
	}
	m := &mirror{repo: repo, dir: dir, store: store}
	if err := setRemote(repo, url); err != nil {
		m.close()
		return nil, fmt.Errorf("setting remote of local mirror %s: %w", dir, err)
	}
	return m, nil
}

func (m *mirror) close() { _ = m.store.Close() }

func setRemote(repo *gogit.Repository, url string) error {
	cfg, err := repo.Config()
	if err != nil {
		return err
	}
	if r, ok := cfg.Remotes[remoteName]; ok && len(r.URLs) == 1 && r.URLs[0] == url {
		return nil
	}
	if _, ok := cfg.Remotes[remoteName]; ok {
		if err := repo.DeleteRemote(remoteName); err != nil {
			return err
		}
	}
	_, err = repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{url}})
	return err
}

// fetch brings the mirror up to date for the wanted ref. An up-to-date
// mirror costs one ref advertisement and no object transfer.
func (m *mirror) fetch(ctx context.Context, w wantedRef, auth transport.AuthMethod) error {
	err := m.repo.FetchContext(ctx, &gogit.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   w.refSpecs,
		Auth:       auth,
		Tags:       gogit.NoTags,
		Force:      true,
	})
	if err == nil || errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil
	}
	var noMatch gogit.NoMatchingRefSpecError
	if errors.As(err, &noMatch) {
		return fmt.Errorf("%s not found on the remote: check that it exists and was pushed", w)
	}
	return err
}

// resolve turns the wanted ref into a commit and its Flux revision string.
func (m *mirror) resolve(w wantedRef) (*object.Commit, string, error) {
	s := w.spec
	switch {
	case s.Commit != "":
		c, err := m.repo.CommitObject(plumbing.NewHash(s.Commit))
		if err != nil {
			where := "any branch or tag"
			if s.Branch != "" {
				where = "branch '" + s.Branch + "'"
			}
			return nil, "", fmt.Errorf("commit '%s' not found in %s of the remote: check spec.ref.commit (full 40-character hash) and that it was pushed: %w", s.Commit, where, err)
		}
		return c, revision(s.Branch, c.Hash), nil
	case s.Name != "":
		c, err := m.commitAt(plumbing.ReferenceName(s.Name))
		return c, revisionOf(s.Name, c), err
	case s.SemVer != "":
		tag, err := latestSemverTag(s.SemVer, m.tags())
		if err != nil {
			return nil, "", err
		}
		c, err := m.commitAt(plumbing.NewTagReferenceName(tag))
		return c, revisionOf(tag, c), err
	case s.Tag != "":
		c, err := m.commitAt(plumbing.NewTagReferenceName(s.Tag))
		return c, revisionOf(s.Tag, c), err
	default:
		c, err := m.commitAt(plumbing.NewBranchReferenceName(s.Branch))
		return c, revisionOf(s.Branch, c), err
	}
}

func revisionOf(named string, c *object.Commit) string {
	if c == nil {
		return ""
	}
	return revision(named, c.Hash)
}

// commitAt peels a ref (through annotated tags) down to its commit.
func (m *mirror) commitAt(name plumbing.ReferenceName) (*object.Commit, error) {
	ref, err := m.repo.Reference(name, true)
	if err != nil {
		return nil, fmt.Errorf("ref %s not found in the fetched repository: %w", name, err)
	}
	if tag, err := m.repo.TagObject(ref.Hash()); err == nil {
		return tag.Commit()
	}
	return m.repo.CommitObject(ref.Hash())
}

func (m *mirror) tags() []string {
	var tags []string
	iter, err := m.repo.Tags()
	if err != nil {
		return nil
	}
	_ = iter.ForEach(func(r *plumbing.Reference) error {
		tags = append(tags, r.Name().Short())
		return nil
	})
	return tags
}

func removeAll(paths ...string) error {
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// treeAt is the tree of a revision's commit.
func (m *mirror) treeAt(revision string) (*object.Tree, error) {
	_, hash, ok := strings.Cut(revision, "sha1:")
	if !ok {
		return nil, fmt.Errorf("revision %q has no sha1", revision)
	}
	c, err := m.repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return nil, err
	}
	return c.Tree()
}
