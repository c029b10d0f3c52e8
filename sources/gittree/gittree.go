// Package gittree lists the files of a git tree that belong in a source
// artifact, with Flux's exclusion rules. The GitRepository reconciler makes
// its artifacts from them, and strata plan renders the same files, of a
// commit or of a working tree on disk.
package gittree

import (
	"io"
	"path"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/strata-gitops/strata/sources/artifact"
)

// Files lists the files of tree that belong in its artifact, with Flux's
// exclusion rules: the default VCS/CI patterns, every .sourceignore (scoped
// to its directory), then a GitRepository's spec.ignore block (nil for
// none); and with spec.sparseCheckout, only the files under the
// directories it lists. Symbolic links are left out. extra are files put
// in the artifact besides the tree's, at their place in it (submodules,
// spec.include): they replace the tree's files of the same path, and the
// exclusion rules, not the sparse checkout, apply to them too.
func Files(tree *object.Tree, specIgnore *string, sparse []string, extra ...artifact.File) ([]artifact.File, error) {
	files, err := walkTree(tree)
	if err != nil {
		return nil, err
	}
	return selectFiles(files, specIgnore, sparse, extra)
}

// candidate is a file of a tree, committed or on disk, and where to read it.
type candidate struct {
	name    string
	symlink bool
	file    artifact.File
	// entry is the committed file's tree entry, named by its path; zero
	// for a file on disk.
	entry object.TreeEntry
}

// selectFiles keeps the candidates, and extra, that an artifact holds.
func selectFiles(files []candidate, specIgnore *string, sparse []string, extra []artifact.File) ([]artifact.File, error) {
	kept, _, err := selectCandidates(files, specIgnore, sparse, extra)
	out := make([]artifact.File, len(kept))
	for i, c := range kept {
		out[i] = c.file
	}
	return out, err
}

// selectCandidates keeps the candidates, and extra, that an artifact
// holds, and returns the ignore patterns it kept them by.
func selectCandidates(files []candidate, specIgnore *string, sparse []string, extra []artifact.File) ([]candidate, []gitignore.Pattern, error) {
	files = withExtra(slices.DeleteFunc(files, func(c candidate) bool { return !inSparseCheckout(c.name, sparse) }), extra)
	patterns, err := sourceIgnorePatterns(files)
	if err != nil {
		return nil, nil, err
	}
	if specIgnore != nil {
		patterns = append(patterns, sourceignore.ReadPatterns(strings.NewReader(*specIgnore), nil)...)
	}
	ignore := newIgnoreCache(patterns)
	var kept []candidate
	for _, f := range files {
		if !f.symlink && !ignore.ignored(f.name) {
			kept = append(kept, f)
		}
	}
	return kept, patterns, nil
}

// withExtra adds extra to files, each replacing a file of the same path.
func withExtra(files []candidate, extra []artifact.File) []candidate {
	if len(extra) == 0 {
		return files
	}
	at := make(map[string]int, len(files))
	for i, f := range files {
		at[f.name] = i
	}
	for _, f := range extra {
		c := candidate{name: f.Path, file: f}
		if i, ok := at[f.Path]; ok {
			files[i] = c
			continue
		}
		at[f.Path] = len(files)
		files = append(files, c)
	}
	return files
}

// sourceIgnorePatterns reads the .sourceignore files among files, each
// scoped to its directory.
func sourceIgnorePatterns(files []candidate) ([]gitignore.Pattern, error) {
	var patterns []gitignore.Pattern
	for _, f := range files {
		if f.symlink || path.Base(f.name) != sourceignore.IgnoreFile {
			continue
		}
		read, err := readPatterns(f.file, domainOf(path.Dir(f.name)))
		if err != nil {
			return nil, err
		}
		patterns = append(patterns, read...)
	}
	return patterns, nil
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

// walkTree returns every file of the tree, in one walk: a walk reads
// every tree object of the commit, a thousand for a thousand directories.
func walkTree(tree *object.Tree) ([]candidate, error) {
	var files []candidate
	err := eachEntry(tree, func(name string, entry object.TreeEntry) {
		if entry.Mode.IsFile() {
			entry.Name = name
			files = append(files, candidate{name: name, symlink: entry.Mode == filemode.Symlink, file: blobFile(tree, entry), entry: entry})
		}
	})
	return files, err
}

// AllFiles lists every file of tree but its symbolic links, named as
// under dir in an artifact, with no rule applied: a submodule's files,
// which Files then takes as extra.
func AllFiles(tree *object.Tree, dir string) ([]artifact.File, error) {
	files, err := walkTree(tree)
	var out []artifact.File
	for _, f := range files {
		if !f.symlink {
			f.file.Path = path.Join(dir, f.name)
			out = append(out, f.file)
		}
	}
	return out, err
}

// Submodules maps the paths of tree's submodules (its gitlinks, at any
// depth) to the commits they point at.
func Submodules(tree *object.Tree) (map[string]plumbing.Hash, error) {
	links := map[string]plumbing.Hash{}
	err := eachEntry(tree, func(name string, entry object.TreeEntry) {
		if entry.Mode == filemode.Submodule {
			links[name] = entry.Hash
		}
	})
	return links, err
}

// eachEntry calls fn with every entry of tree, at any depth.
func eachEntry(tree *object.Tree, fn func(name string, entry object.TreeEntry)) error {
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fn(name, entry)
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

// newIgnoreCache matches Flux's default exclusions, then patterns.
func newIgnoreCache(patterns []gitignore.Pattern) ignoreCache {
	return ignoreCache{m: sourceignore.NewDefaultMatcher(patterns, nil), dirs: map[string]bool{}}
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

// blobFile is the committed file of entry, named by its path, read
// through tree: any tree of the same repository.
func blobFile(tree *object.Tree, entry object.TreeEntry) artifact.File {
	return artifact.File{
		Key:        entry.Hash.String(),
		Path:       entry.Name,
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

// Selected keeps the files of any other source (an OCI artifact's layer,
// a bucket's objects) that belong in its artifact, by the same rules as a
// git tree's: Flux's default exclusions, every .sourceignore among them,
// then spec.ignore.
func Selected(files []artifact.File, specIgnore *string) ([]artifact.File, error) {
	candidates := make([]candidate, len(files))
	for i, f := range files {
		candidates[i] = candidate{name: f.Path, file: f}
	}
	return selectFiles(candidates, specIgnore, nil, nil)
}
