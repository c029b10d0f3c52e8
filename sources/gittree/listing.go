package gittree

import (
	"maps"
	"path"
	"slices"

	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/utils/ptr"

	"github.com/strata-gitops/strata/sources/artifact"
)

// Listing is what Files selects from one tree, kept so that a later
// tree's files can be listed from the changes between the two. A push
// that changes one file among thousands then matches that file against
// the ignore rules, not every file of the tree again.
type Listing struct {
	tree       plumbing.Hash
	specIgnore *string
	sparse     []string
	// patterns are the .sourceignore files' and spec.ignore's, as Files
	// read them from the tree.
	patterns []gitignore.Pattern
	// kept are the selected files' entries by path, each named by its
	// path.
	kept map[string]object.TreeEntry
}

// List selects tree's files as Files does with no extra files, and keeps
// the selection.
func List(tree *object.Tree, specIgnore *string, sparse []string) (*Listing, error) {
	files, err := walkTree(tree)
	if err != nil {
		return nil, err
	}
	selected, patterns, err := selectCandidates(files, specIgnore, sparse, nil)
	if err != nil {
		return nil, err
	}
	l := &Listing{tree: tree.Hash, specIgnore: specIgnore, sparse: sparse, patterns: patterns,
		kept: make(map[string]object.TreeEntry, len(selected))}
	for _, c := range selected {
		l.kept[c.name] = c.entry
	}
	return l, nil
}

// Next lists to's files with the same rules, given from, the tree l
// lists, or nil when there is none. It returns the paths that differ
// between from and to too (Changed; nil without from). It lists to anew
// when l is nil, lists another tree or other rules, or when a
// .sourceignore file changed, since that moves the rules.
func (l *Listing) Next(from, to *object.Tree, specIgnore *string, sparse []string) (*Listing, []string, error) {
	if from == nil {
		next, err := List(to, specIgnore, sparse)
		return next, nil, err
	}
	changed, entries, err := diff(from, to)
	if err != nil {
		return nil, nil, err
	}
	if l == nil || from.Hash != l.tree || !ptr.Equal(l.specIgnore, specIgnore) || !slices.Equal(l.sparse, sparse) ||
		slices.ContainsFunc(changed, isSourceIgnore) {
		next, err := List(to, specIgnore, sparse)
		return next, changed, err
	}
	next := &Listing{tree: to.Hash, specIgnore: specIgnore, sparse: sparse, patterns: l.patterns, kept: maps.Clone(l.kept)}
	ignore := newIgnoreCache(l.patterns)
	for _, name := range changed {
		delete(next.kept, name)
		entry, ok := entries[name]
		if ok && entry.Mode.IsFile() && entry.Mode != filemode.Symlink && inSparseCheckout(name, sparse) && !ignore.ignored(name) {
			next.kept[name] = entry
		}
	}
	return next, changed, nil
}

// Files are the listed files, in path order, read through tree: any tree
// of the same repository.
func (l *Listing) Files(tree *object.Tree) []artifact.File {
	names := slices.Sorted(maps.Keys(l.kept))
	out := make([]artifact.File, len(names))
	for i, name := range names {
		out[i] = blobFile(tree, l.kept[name])
	}
	return out
}

// Changed lists the paths that differ between two trees: each changed
// file's old and new path. Subtrees both trees share are not read.
func Changed(from, to *object.Tree) ([]string, error) {
	changed, _, err := diff(from, to)
	return changed, err
}

// diff is Changed, with the entries of to's changed files, each named by
// its path. Only the subtrees whose hashes differ are read: go-git's
// DiffTree reads every subtree of both trees to count its entries, 15 ms
// for a thousand directories.
func diff(from, to *object.Tree) ([]string, map[string]object.TreeEntry, error) {
	// Not nil when nothing changed: nil is "unknown" to Next's callers.
	d := &differ{changed: []string{}, entries: map[string]object.TreeEntry{}}
	if err := d.trees("", from, to); err != nil {
		return nil, nil, err
	}
	return d.changed, d.entries, nil
}

// differ gathers the files, symbolic links and gitlinks that differ
// between two trees.
type differ struct {
	changed []string
	entries map[string]object.TreeEntry
}

// trees diffs from and to, the trees at dir, in the trees' own order.
func (d *differ) trees(dir string, from, to *object.Tree) error {
	old := entriesByName(from)
	newer := entriesByName(to)
	for _, o := range from.Entries {
		if _, kept := newer[o.Name]; !kept {
			if err := d.leaves(from, path.Join(dir, o.Name), o, false); err != nil {
				return err
			}
		}
	}
	for _, e := range to.Entries {
		o, had := old[e.Name]
		if had && o.Hash == e.Hash && o.Mode == e.Mode {
			continue
		}
		if err := d.entry(dir, from, to, o, had, e); err != nil {
			return err
		}
	}
	return nil
}

func entriesByName(t *object.Tree) map[string]object.TreeEntry {
	m := make(map[string]object.TreeEntry, len(t.Entries))
	for _, e := range t.Entries {
		m[e.Name] = e
	}
	return m
}

// entry is one name of to's tree at dir that differs from from's: e in
// to, o in from when had.
func (d *differ) entry(dir string, from, to *object.Tree, o object.TreeEntry, had bool, e object.TreeEntry) error {
	p := path.Join(dir, e.Name)
	switch {
	case had && o.Mode == filemode.Dir && e.Mode == filemode.Dir:
		subFrom, err := from.Tree(o.Name)
		if err != nil {
			return err
		}
		subTo, err := to.Tree(e.Name)
		if err != nil {
			return err
		}
		return d.trees(p, subFrom, subTo)
	case had && o.Mode != filemode.Dir && e.Mode != filemode.Dir:
		d.add(p, e, true)
		return nil
	}
	if had {
		if err := d.leaves(from, p, o, false); err != nil {
			return err
		}
	}
	return d.leaves(to, p, e, true)
}

// leaves records entry e of tree at p, or every entry below it when it is
// a directory; with in, as entries of the newer tree.
func (d *differ) leaves(tree *object.Tree, p string, e object.TreeEntry, in bool) error {
	if e.Mode != filemode.Dir {
		d.add(p, e, in)
		return nil
	}
	sub, err := tree.Tree(e.Name)
	if err != nil {
		return err
	}
	return eachEntry(sub, func(name string, entry object.TreeEntry) {
		if entry.Mode != filemode.Dir {
			d.add(path.Join(p, name), entry, in)
		}
	})
}

func (d *differ) add(p string, e object.TreeEntry, in bool) {
	d.changed = append(d.changed, p)
	if in {
		e.Name = p
		d.entries[p] = e
	}
}

func isSourceIgnore(name string) bool { return path.Base(name) == sourceignore.IgnoreFile }
