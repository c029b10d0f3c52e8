package git

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

// treeFiles lists the files of a commit that belong in its artifact, with
// Flux's exclusion rules: the default VCS/CI patterns, every .sourceignore
// in the tree (scoped to its directory), then the spec's ignore block.
func treeFiles(c *object.Commit, specIgnore *string) ([]artifact.File, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	patterns, err := sourceIgnorePatterns(tree)
	if err != nil {
		return nil, err
	}
	if specIgnore != nil {
		patterns = append(patterns, sourceignore.ReadPatterns(strings.NewReader(*specIgnore), nil)...)
	}
	matcher := sourceignore.NewDefaultMatcher(patterns, nil)

	var files []artifact.File
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if !entry.Mode.IsFile() || entry.Mode == filemode.Symlink || ignored(matcher, name) {
			continue
		}
		files = append(files, blobFile(tree, name, entry))
	}
}

// ignored checks the file and each parent directory, since a directory
// pattern ("docs/") must exclude everything below it.
func ignored(m gitignore.Matcher, name string) bool {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		if m.Match(parts[:i], true) {
			return true
		}
	}
	return m.Match(parts, false)
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

// sourceIgnorePatterns reads every .sourceignore in the tree; only those
// blobs are read, the rest of the walk sees names alone.
func sourceIgnorePatterns(tree *object.Tree) ([]gitignore.Pattern, error) {
	var patterns []gitignore.Pattern
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if err == io.EOF {
			return patterns, nil
		}
		if err != nil {
			return nil, err
		}
		if !entry.Mode.IsFile() || path.Base(name) != sourceignore.IgnoreFile {
			continue
		}
		r, err := blobFile(tree, name, entry).Open()
		if err != nil {
			return nil, err
		}
		var domain []string
		if dir := path.Dir(name); dir != "." {
			domain = strings.Split(dir, "/")
		}
		patterns = append(patterns, sourceignore.ReadPatterns(r, domain)...)
		r.Close()
	}
}
