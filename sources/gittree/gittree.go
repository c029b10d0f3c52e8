// Package gittree lists the files of a git tree that belong in a source
// artifact, with Flux's exclusion rules. The GitRepository reconciler makes
// its artifacts from them, and strata plan renders the same files.
package gittree

import (
	"io"
	"path"
	"strings"

	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/strata-gitops/strata/sources/artifact"
)

// Files lists the files of tree that belong in its artifact, with Flux's
// exclusion rules: the default VCS/CI patterns, every .sourceignore in the
// tree (scoped to its directory), then a GitRepository's spec.ignore block
// (nil for none); and with spec.sparseCheckout, only the files under the
// directories it lists. Symbolic links are left out.
func Files(tree *object.Tree, specIgnore *string, sparse []string) ([]artifact.File, error) {
	entries, patterns, err := walkTree(tree)
	if err != nil {
		return nil, err
	}
	if specIgnore != nil {
		patterns = append(patterns, sourceignore.ReadPatterns(strings.NewReader(*specIgnore), nil)...)
	}
	ignore := ignoreCache{m: sourceignore.NewDefaultMatcher(patterns, nil), dirs: map[string]bool{}}
	var files []artifact.File
	for _, e := range entries {
		if e.entry.Mode != filemode.Symlink && inSparseCheckout(e.name, sparse) && !ignore.ignored(e.name) {
			files = append(files, blobFile(tree, e.name, e.entry))
		}
	}
	return files, nil
}

// inSparseCheckout reports whether a file belongs to a sparse checkout of
// dirs; every file does when dirs is empty or lists the root.
func inSparseCheckout(name string, dirs []string) bool {
	if len(dirs) == 0 {
		return true
	}
	for _, d := range dirs {
		d = path.Clean(strings.Trim(d, "/"))
		if d == "." || strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

type namedEntry struct {
	name  string
	entry object.TreeEntry
}

// walkTree returns every file of the tree and the patterns of its
// .sourceignore files, in one walk: a walk reads every tree object of the
// commit, a thousand for a thousand directories. Only the .sourceignore
// blobs are read.
func walkTree(tree *object.Tree) ([]namedEntry, []gitignore.Pattern, error) {
	var entries []namedEntry
	var patterns []gitignore.Pattern
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if err == io.EOF {
			return entries, patterns, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if !entry.Mode.IsFile() {
			continue
		}
		entries = append(entries, namedEntry{name, entry})
		if path.Base(name) != sourceignore.IgnoreFile {
			continue
		}
		read, err := ignorePatterns(tree, name, entry)
		if err != nil {
			return nil, nil, err
		}
		patterns = append(patterns, read...)
	}
}

// ignorePatterns reads one .sourceignore, its patterns scoped to its
// directory.
func ignorePatterns(tree *object.Tree, name string, entry object.TreeEntry) ([]gitignore.Pattern, error) {
	r, err := blobFile(tree, name, entry).Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var domain []string
	if dir := path.Dir(name); dir != "." {
		domain = strings.Split(dir, "/")
	}
	return sourceignore.ReadPatterns(r, domain), nil
}

// ignoreCache answers whether a file is excluded: the file itself or any
// parent directory, since a directory pattern ("docs/") excludes
// everything below it. Each directory is matched once, as a walk that
// skips an excluded directory would.
type ignoreCache struct {
	m    gitignore.Matcher
	dirs map[string]bool
}

func (c ignoreCache) ignored(name string) bool {
	parts := strings.Split(name, "/")
	end := 0
	for i := 1; i < len(parts); i++ {
		end += len(parts[i-1]) + 1
		dir := name[:end-1]
		out, seen := c.dirs[dir]
		if !seen {
			out = c.m.Match(parts[:i], true)
			c.dirs[dir] = out
		}
		if out {
			return true
		}
	}
	return c.m.Match(parts, false)
}

func blobFile(tree *object.Tree, name string, entry object.TreeEntry) artifact.File {
	return artifact.File{
		Path:       name,
		Executable: entry.Mode == filemode.Executable,
		Open: func() (io.ReadCloser, error) {
			f, err := tree.TreeEntryFile(&entry)
			if err != nil {
				return nil, err
			}
			return f.Reader()
		},
	}
}
