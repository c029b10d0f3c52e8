// Package gittree lists the files of a git tree that belong in a source
// artifact, with Flux's exclusion rules. The GitRepository reconciler makes
// its artifacts from them, and strata plan renders the same files, of a
// commit or of a working tree on disk.
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
	files, patterns, err := walkTree(tree)
	if err != nil {
		return nil, err
	}
	return selectFiles(files, patterns, specIgnore, sparse), nil
}

// candidate is a file of a tree, committed or on disk, and where to read it.
type candidate struct {
	name    string
	symlink bool
	file    artifact.File
}

// selectFiles keeps the candidates an artifact holds: patterns are those
// of the tree's .sourceignore files.
func selectFiles(files []candidate, patterns []gitignore.Pattern, specIgnore *string, sparse []string) []artifact.File {
	if specIgnore != nil {
		patterns = append(patterns, sourceignore.ReadPatterns(strings.NewReader(*specIgnore), nil)...)
	}
	ignore := ignoreCache{m: sourceignore.NewDefaultMatcher(patterns, nil), dirs: map[string]bool{}}
	var out []artifact.File
	for _, f := range files {
		if !f.symlink && inSparseCheckout(f.name, sparse) && !ignore.ignored(f.name) {
			out = append(out, f.file)
		}
	}
	return out
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

// walkTree returns every file of the tree and the patterns of its
// .sourceignore files, in one walk: a walk reads every tree object of the
// commit, a thousand for a thousand directories. Only the .sourceignore
// blobs are read.
func walkTree(tree *object.Tree) ([]candidate, []gitignore.Pattern, error) {
	var files []candidate
	var patterns []gitignore.Pattern
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if err == io.EOF {
			return files, patterns, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if !entry.Mode.IsFile() {
			continue
		}
		file := blobFile(tree, name, entry)
		files = append(files, candidate{name: name, symlink: entry.Mode == filemode.Symlink, file: file})
		if path.Base(name) != sourceignore.IgnoreFile {
			continue
		}
		read, err := readPatterns(file, domainOf(path.Dir(name)))
		if err != nil {
			return nil, nil, err
		}
		patterns = append(patterns, read...)
	}
}

// readPatterns reads one ignore file, its patterns scoped to domain, the
// directory holding it.
func readPatterns(f artifact.File, domain []string) ([]gitignore.Pattern, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return sourceignore.ReadPatterns(r, domain), nil
}

// domainOf is a directory's path as ignore patterns scope it; nil for the
// top.
func domainOf(dir string) []string {
	if dir == "." || dir == "" {
		return nil
	}
	return strings.Split(dir, "/")
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
