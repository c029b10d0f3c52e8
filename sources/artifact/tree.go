package artifact

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// treeWriters is how many files are written at once: file creation is
// bound by system calls, which overlap with each other and with the
// compression that runs beside.
const treeWriters = 4

// treeWriter writes the files of an artifact tree in the background.
type treeWriter struct {
	root  string
	jobs  chan treeFile
	wg    sync.WaitGroup
	dirs  sync.Map // directories known to exist
	mu    sync.Mutex
	err   error
	ended bool
}

type treeFile struct {
	name string
	data []byte
	mode os.FileMode
}

func newTreeWriter(root string) *treeWriter {
	t := &treeWriter{root: filepath.Clean(root), jobs: make(chan treeFile, 64)}
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
	target := filepath.Join(t.root, filepath.FromSlash(name))
	if !strings.HasPrefix(target, t.root+string(os.PathSeparator)) {
		return fmt.Errorf("entry %q escapes the artifact root", name)
	}
	if err := t.failed(); err != nil {
		return err
	}
	t.jobs <- treeFile{name: target, data: data, mode: mode}
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
