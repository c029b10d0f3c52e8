package gittree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/fluxcd/pkg/sourceignore/gitignore"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/strata-gitops/strata/sources/artifact"
)

// DiskFiles lists the files of the git working tree at top that an
// artifact would hold once they are committed: what `git add --all` would
// commit (untracked files included, those git ignores left out, tracked
// ones kept even where a .gitignore matches them), under the same rules
// as Files. git's ignore files are read as git reads them: each
// directory's .gitignore, .git/info/exclude and the user's excludes file
// (core.excludesFile).
func DiskFiles(top string, specIgnore *string, sparse []string) ([]artifact.File, error) {
	w := diskWalk{top: top}
	// Later patterns take precedence: the user's excludes, then the
	// repository's, then each directory's .gitignore as it is entered.
	user, err := userExcludes(top)
	if err != nil {
		return nil, err
	}
	exclude, err := readDiskPatterns(filepath.Join(top, ".git", "info", "exclude"), nil)
	if err != nil {
		return nil, err
	}
	w.gitPatterns = append(user, exclude...)
	if w.tracked, w.trackedDirs, err = trackedPaths(top); err != nil {
		return nil, err
	}
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
	gitPatterns []gitignore.Pattern // core.excludesFile, .git/info/exclude and .gitignore
	// tracked are the paths git's index holds, which git commits even
	// where an ignore pattern matches them; trackedDirs the directories
	// above them.
	tracked, trackedDirs map[string]bool
}

// trackedPaths reads the paths of the index of the repository at top, and
// the directories holding them; none without an index (no commit yet).
func trackedPaths(top string) (files, dirs map[string]bool, err error) {
	files, dirs = map[string]bool{}, map[string]bool{}
	f, err := os.Open(filepath.Join(top, ".git", "index"))
	if errors.Is(err, fs.ErrNotExist) {
		return files, dirs, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	idx := &index.Index{}
	if err := index.NewDecoder(f).Decode(idx); err != nil {
		return nil, nil, fmt.Errorf("reading git's index %s, which says which files git tracks: %w; "+
			"check the clone with `git status`, or plan a committed revision instead of WORKTREE", f.Name(), err)
	}
	for _, e := range idx.Entries {
		files[e.Name] = true
		for d := path.Dir(e.Name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return files, dirs, nil
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
		if name != "." && !w.trackedDirs[name] && w.gitIgnores(name, true) {
			return filepath.SkipDir
		}
		return w.enter(p, domainOf(name))
	}
	symlink := d.Type()&fs.ModeSymlink != 0
	if (!w.tracked[name] && w.gitIgnores(name, false)) || (!d.Type().IsRegular() && !symlink) {
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
