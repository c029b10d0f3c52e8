package gittree

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/fluxcd/pkg/sourceignore/gitignore"

	"github.com/strata-gitops/strata/sources/artifact"
)

// DiskFiles lists the files of the git working tree at top that an
// artifact would hold once they are committed: what `git add --all` would
// commit (untracked files included, those git ignores left out), under
// the same rules as Files. A tracked file that a .gitignore also matches
// is left out too; git keeps committing it, but such files are rare in a
// cluster repository.
func DiskFiles(top string, specIgnore *string, sparse []string) ([]artifact.File, error) {
	w := diskWalk{top: top}
	exclude, err := readDiskPatterns(filepath.Join(top, ".git", "info", "exclude"), nil)
	if err != nil {
		return nil, err
	}
	w.gitPatterns = exclude
	if err := filepath.WalkDir(top, w.visit); err != nil {
		return nil, err
	}
	return selectFiles(w.files, specIgnore, sparse, nil)
}

// diskWalk gathers the files of a working tree that git does not ignore,
// reading git's ignore files directory by directory: a directory's own
// .gitignore is read as it is entered, before anything below it is
// matched.
type diskWalk struct {
	top         string
	files       []candidate
	gitPatterns []gitignore.Pattern // .gitignore and .git/info/exclude
}

func (w *diskWalk) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(w.top, p)
	if err != nil {
		return err
	}
	name := filepath.ToSlash(rel)
	if d.Name() == ".git" {
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	}
	if d.IsDir() {
		if name != "." && w.gitIgnores(name, true) {
			return filepath.SkipDir
		}
		return w.enter(p, domainOf(name))
	}
	symlink := d.Type()&fs.ModeSymlink != 0
	if w.gitIgnores(name, false) || (!d.Type().IsRegular() && !symlink) {
		return nil
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	w.files = append(w.files, candidate{name: name, symlink: symlink, file: artifact.DiskFile(p, name, info.Mode())})
	return nil
}

// enter reads a directory's .gitignore.
func (w *diskWalk) enter(dir string, domain []string) error {
	git, err := readDiskPatterns(filepath.Join(dir, ".gitignore"), domain)
	if err != nil {
		return err
	}
	w.gitPatterns = append(w.gitPatterns, git...)
	return nil
}

func (w *diskWalk) gitIgnores(name string, dir bool) bool {
	return gitignore.NewMatcher(w.gitPatterns).Match(strings.Split(name, "/"), dir)
}

// readDiskPatterns reads an ignore file on disk; none when it is absent.
func readDiskPatterns(p string, domain []string) ([]gitignore.Pattern, error) {
	patterns, err := readPatterns(artifact.DiskFile(p, path.Base(p), 0), domain)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return patterns, err
}
