package plan

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/strata-gitops/strata/reconciler/decrypt"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
)

// WorkTree as a head ref plans the working tree as it is on disk,
// uncommitted changes included.
const WorkTree = "WORKTREE"

// snapshot is one side of the plan: the files an artifact of a revision
// would hold, on disk, where Flux's generator and kustomize can read them.
type snapshot struct {
	ref    string
	commit string // empty for the working tree
	top    string // the checkout: the repository's top directory
	root   string // the source root: the checkout plus --source-root
	remove func()
	// rules are the GitRepository's own file rules the checkout applied.
	rules sourceRules
	// rootRender is the root Kustomization's render, made while reading
	// the rules; nil when not made on these files.
	rootRender *rendered
	// dec decrypts for Kustomizations with spec.decryption
	// (--decryption-key-file); nil keeps their files encrypted.
	dec *decrypt.Decrypter
	// sourceDirs stand for other sources (Options.SourceDirs).
	sourceDirs map[string]string
}

// relative writes the paths of the checkout in msg relative to the
// repository, so that a message is the same on every run (a checkout's
// temporary directory is new each time) and names the file as the
// reviewer knows it.
func (s *snapshot) relative(msg string) string {
	if s.top == "" {
		return msg
	}
	return strings.ReplaceAll(strings.ReplaceAll(msg, s.top+string(filepath.Separator), ""), s.top, ".")
}

// checkout writes into a temporary directory the files an artifact of ref
// would hold under rules: of its tree, or for WorkTree of the working tree
// as a commit of it would hold them. The checkout goes to memory-backed
// /dev/shm when there is one: thousands of small files are written per
// side.
func checkout(repo *gogit.Repository, repoDir, ref, sourceRoot string, rules sourceRules) (*snapshot, error) {
	included, commit, err := filesOf(repo, repoDir, ref, rules)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempBase(), "strata-plan-")
	if err != nil {
		return nil, err
	}
	s := &snapshot{ref: ref, commit: commit, top: dir, root: filepath.Join(dir, sourceRoot),
		remove: func() { _ = os.RemoveAll(dir) }, rules: rules}
	if err := writeFiles(included, dir); err != nil {
		s.remove()
		return nil, fmt.Errorf("checking out %s: %w", ref, err)
	}
	return s, nil
}

// filesOf lists the files an artifact of ref would hold under rules, and
// the commit ref names (none for WorkTree).
func filesOf(repo *gogit.Repository, repoDir, ref string, rules sourceRules) ([]artifact.File, string, error) {
	if ref == WorkTree {
		// The working tree is read from the clone's top, whichever
		// directory inside the clone --repo names.
		gitDir, err := findGitDir(repoDir)
		if err != nil {
			return nil, "", err
		}
		files, err := gittree.DiskFiles(filepath.Dir(gitDir), rules.ignore, rules.sparse)
		return files, "", err
	}
	tree, hash, err := treeOf(repo, repoDir, ref)
	if err != nil {
		return nil, "", err
	}
	files, err := gittree.Files(tree, rules.ignore, rules.sparse)
	return files, hash, err
}

// treeOf is the tree of the commit ref names, and that commit.
func treeOf(repo *gogit.Repository, repoDir, ref string) (*object.Tree, string, error) {
	hash, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return nil, "", fmt.Errorf("resolving %q in %s: %w: name a branch, tag or commit of that repository", ref, repoDir, err)
	}
	commit, err := repo.CommitObject(*hash)
	if err != nil {
		return nil, "", fmt.Errorf("reading commit %s (%s): %w", hash, ref, err)
	}
	tree, err := commit.Tree()
	return tree, hash.String(), err
}

func tempBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", ".strata-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// writeFiles writes the files under dir. Blobs are read in this goroutine
// (go-git's storage is not safe for concurrent readers); a few writers
// create the files.
func writeFiles(included []artifact.File, dir string) error {
	type file struct {
		path string
		data []byte
		mode os.FileMode
	}
	queue := make(chan file, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var writeErr error
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range queue {
				err := os.MkdirAll(filepath.Dir(f.path), 0o755)
				if err == nil {
					err = os.WriteFile(f.path, f.data, f.mode)
				}
				if err != nil {
					mu.Lock()
					writeErr = err
					mu.Unlock()
				}
			}
		}()
	}
	var readErr error
	for _, f := range included {
		var data []byte
		if data, readErr = readFile(f); readErr != nil {
			break
		}
		mode := os.FileMode(0o644)
		if f.Executable {
			mode = 0o755
		}
		queue <- file{filepath.Join(dir, filepath.FromSlash(f.Path)), data, mode}
	}
	close(queue)
	wg.Wait()
	if readErr != nil {
		return readErr
	}
	return writeErr
}

func readFile(f artifact.File) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Path, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Path, err)
	}
	return data, nil
}

// openRepository opens the git repository holding dir. Pack files stay
// open while the plan reads thousands of objects from them.
func openRepository(dir string) (*gogit.Repository, func(), error) {
	gitDir, err := findGitDir(dir)
	if err != nil {
		return nil, nil, err
	}
	store := filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	repo, err := gogit.Open(store, osfs.New(filepath.Dir(gitDir)))
	if err != nil {
		_ = store.Close()
		return nil, nil, fmt.Errorf("opening git repository %s: %w", gitDir, err)
	}
	return repo, func() { _ = store.Close() }, nil
}

func findGitDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, ".git")); err == nil && st.IsDir() {
			return filepath.Join(d, ".git"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside a git repository: pass --repo the directory of a clone", dir)
		}
	}
}

// changedFiles lists the files that differ between two commits.
func changedFiles(repo *gogit.Repository, base, head string) (map[string]bool, error) {
	trees := make([]*object.Tree, 2)
	for i, h := range []string{base, head} {
		c, err := repo.CommitObject(plumbing.NewHash(h))
		if err != nil {
			return nil, err
		}
		if trees[i], err = c.Tree(); err != nil {
			return nil, err
		}
	}
	changed, err := gittree.Changed(trees[0], trees[1])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(changed))
	for _, name := range changed {
		out[name] = true
	}
	return out, nil
}

// changedUnder reports whether any of changed lies under dir (both
// slash-separated, relative to the repository).
func changedUnder(changed map[string]bool, dir string) bool {
	dir = strings.Trim(filepath.ToSlash(filepath.Clean(dir)), "/")
	for f := range changed {
		if dir == "" || dir == "." || f == dir || strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}
