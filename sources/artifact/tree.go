package artifact

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// treeWriters is how many files are written at once: file creation is
// bound by system calls, which overlap with each other and with the
// compression that runs beside.
const treeWriters = 4

// treeWriter writes the files of an artifact tree in the background.
// Given the manifest of the tree already at root (a recycled one), it
// writes only the files whose content or mode differ.
type treeWriter struct {
	root  string
	base  manifest
	out   manifest // what the tree holds once written; filled by add
	jobs  chan treeFile
	wg    sync.WaitGroup
	dirs  sync.Map // directories known to exist
	mu    sync.Mutex
	err   error
	ended bool
}

// manifest lists a tree's files, by slash-separated path, with a hash of
// each one's content and its mode.
type manifest map[string]fileSum

type fileSum struct {
	sum  [sha256.Size]byte
	mode os.FileMode
}

func sumOf(data []byte, mode os.FileMode) fileSum {
	return fileSum{sum: sha256.Sum256(data), mode: mode}
}

type treeFile struct {
	name    string
	data    []byte
	mode    os.FileMode
	replace bool // the recycled tree has an older version
}

func newTreeWriter(root string) *treeWriter {
	return recycleTree(root, nil)
}

// recycleTree prepares writing a tree at root, which holds the files base
// lists; the caller then adds every file of the new tree.
func recycleTree(root string, base manifest) *treeWriter {
	t := &treeWriter{root: filepath.Clean(root), base: base, out: manifest{}, jobs: make(chan treeFile, 64)}
	t.dirs.Store(t.root, true)
	for range treeWriters {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			for f := range t.jobs {
				if err := t.write(f); err != nil {
					t.fail(err)
				}
			}
		}()
	}
	return t
}

// add queues a file; name is slash-separated and must stay inside the root.
func (t *treeWriter) add(name string, data []byte, mode os.FileMode) error {
	return t.addKnown(name, sumOf(data, mode), func() ([]byte, error) { return data, nil })
}

// addKnown queues a file whose sum is known, reading its content only when
// the recycled tree holds something else there.
func (t *treeWriter) addKnown(name string, sum fileSum, read func() ([]byte, error)) error {
	target := filepath.Join(t.root, filepath.FromSlash(name))
	if !strings.HasPrefix(target, t.root+string(os.PathSeparator)) {
		return fmt.Errorf("entry %q escapes the artifact root", name)
	}
	if err := t.failed(); err != nil {
		return err
	}
	t.out[name] = sum
	old, had := t.base[name]
	if had && old == sum {
		return nil
	}
	data, err := read()
	if err != nil {
		return err
	}
	t.jobs <- treeFile{name: target, data: data, mode: sum.mode, replace: had}
	return nil
}

// removeStale deletes the files of the recycled tree that the new one
// lacks, and the directories that leaves empty, before any file is added:
// a file may become a directory or a directory a file.
func (t *treeWriter) removeStale(keep []string) error {
	wanted := make(map[string]bool, len(keep))
	for _, name := range keep {
		wanted[name] = true
	}
	var dirs []string
	for name := range t.base {
		if wanted[name] {
			continue
		}
		if err := os.Remove(filepath.Join(t.root, filepath.FromSlash(name))); err != nil && !os.IsNotExist(err) {
			return err
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	// Deepest first; a directory that still holds files stays.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		_ = os.Remove(filepath.Join(t.root, filepath.FromSlash(d)))
	}
	return nil
}

// wait finishes every queued file and returns the first error.
func (t *treeWriter) wait() error {
	t.mu.Lock()
	if !t.ended {
		t.ended = true
		close(t.jobs)
	}
	t.mu.Unlock()
	t.wg.Wait()
	return t.failed()
}

func (t *treeWriter) write(f treeFile) error {
	dir := filepath.Dir(f.name)
	if _, ok := t.dirs.Load(dir); !ok {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		t.dirs.Store(dir, true)
	}
	if f.replace {
		// A changed file may also have a new mode, which WriteFile would
		// not apply to an existing file.
		if err := os.Remove(f.name); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return os.WriteFile(f.name, f.data, f.mode)
}

func (t *treeWriter) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

func (t *treeWriter) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
