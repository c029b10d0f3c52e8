// Package artifact stores source artifacts on local disk: one gzipped
// tarball per content digest, written atomically, extracted once for
// readers, and garbage-collected when no longer referenced.
package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	meta "github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/atomicfile"
)

// File is one regular file of an artifact.
type File struct {
	Path       string // slash-separated, relative to the artifact root
	Executable bool
	Open       func() (io.ReadCloser, error)
	// Key identifies the content: two files with the same path, mode and
	// key hold the same bytes (a git blob's hash). Empty when unknown; a
	// file with a key may be copied from the previous artifact unread.
	Key string
}

// DiskFile is the file at p on disk, as name in an artifact; mode says
// whether it is executable.
func DiskFile(p, name string, mode os.FileMode) File {
	return File{Path: name, Executable: mode&0o111 != 0, Open: func() (io.ReadCloser, error) { return os.Open(p) }}
}

// Storage is a directory of artifacts. BaseURL is where the artifact file
// server is reachable, used to fill Artifact.URL as Flux does.
type Storage struct {
	Root    string
	BaseURL string
	// Limits bound what one artifact may hold; see DefaultLimits.
	Limits Limits

	extractMu sync.Mutex
	// extracting holds one lock per digest so concurrent readers of the same
	// revision extract it once.
	extracting map[string]*sync.Mutex
	// changes maps an artifact digest to the files its revision changed.
	changes sync.Map
	// bootID names this boot of the machine. Artifacts are written
	// without waiting for the disk, marked with the boot that wrote them;
	// one from an earlier boot may have been damaged by a power failure
	// and is verified before use. Empty when unknown: then every write
	// waits for the disk.
	bootID string
	// trusted holds the trees known whole in this process.
	trusted sync.Map
	// manifests holds, by directory, what each tree written by this
	// process contains, so that a garbage tree can be recycled.
	manifests sync.Map
	// members are the members of each source's last tarball.
	members lastMembers
}

// spareTree is where garbage collection sets aside one old tree per
// source. The next Store rewrites only the files that differ, so that a
// push changing one file of thousands writes about one file, not
// thousands. No reader ever addresses it.
const spareTree = ".spare"

// NewStorage returns a storage rooted at root, creating it.
func NewStorage(root, baseURL string) (*Storage, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("creating artifact directory %s: %w", root, err)
	}
	return &Storage{Root: root, BaseURL: strings.TrimSuffix(baseURL, "/"), Limits: DefaultLimits,
		extracting: map[string]*sync.Mutex{}, bootID: readBootID()}, nil
}

// Limits bound the bytes of one file and of all files of an artifact,
// when it is written and when it is read back. A repository is manifests;
// a file or tree past these is a mistake (a committed disk image) or an
// attack on the controller's memory and disk.
type Limits struct {
	File, Artifact int64
}

// DefaultLimits are the limits of a new Storage.
var DefaultLimits = Limits{File: 64 << 20, Artifact: 512 << 20}

// budget counts the bytes of one artifact against its limits.
type budget struct {
	Limits
	used int64
}

// take accounts for a file of n bytes, or says which limit it breaks.
func (b *budget) take(name string, n int64) error {
	if b.File > 0 && n > b.File {
		return fmt.Errorf("file %s is %d bytes, over the limit of %d per file: keep large files out of the repository (.sourceignore or spec.ignore)", name, n, b.File)
	}
	b.used += n
	if b.Artifact > 0 && b.used > b.Artifact {
		return fmt.Errorf("the files up to %s are over %d bytes, the limit per artifact: keep large files out of the repository (.sourceignore or spec.ignore)", name, b.Artifact)
	}
	return nil
}

const bootIDFile = "/proc/sys/kernel/random/boot_id"

func readBootID() string {
	data, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// bootMarker is the file beside an extracted tree that names the boot
// that wrote the tree and its tarball.
func bootMarker(tree string) string { return tree + ".boot" }

// markWritten records that tree and its tarball were written in this boot.
func (s *Storage) markWritten(tree string) error {
	s.trusted.Store(tree, true)
	if s.bootID == "" {
		return nil
	}
	return atomicfile.WriteCache(bootMarker(tree), []byte(s.bootID))
}

// writtenThisBoot says the tree, if it exists, is whole: written by this
// boot, or, when the boot is unknown, durably.
func (s *Storage) writtenThisBoot(tree string) bool {
	if _, ok := s.trusted.Load(tree); ok {
		return true
	}
	if s.bootID == "" {
		return true
	}
	data, err := os.ReadFile(bootMarker(tree))
	if err != nil || string(data) != s.bootID {
		return false
	}
	s.trusted.Store(tree, true)
	return true
}

// ObjectDir is the relative directory of one source object's artifacts.
func ObjectDir(kind, namespace, name string) string {
	return filepath.ToSlash(filepath.Join(strings.ToLower(kind), namespace, name))
}

// Store writes files as a tarball named by its sha256 digest under the
// object's directory, and their tree beside it for Dir, written while the
// tarball compresses. Both appear under their final names only when
// complete, so a crash never leaves a partial artifact behind.
func (s *Storage) Store(objectDir, revision string, files []File) (*meta.Artifact, error) {
	dir := filepath.Join(s.Root, objectDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("writing artifact for %s: %w", revision, err)
	}
	tmp, base, err := s.startTree(dir)
	if err != nil {
		return nil, fmt.Errorf("writing artifact for %s: %w", revision, err)
	}
	defer os.RemoveAll(tmp)
	tree := recycleTree(tmp, base)
	if err := tree.removeStale(paths(files)); err != nil {
		return nil, fmt.Errorf("writing artifact for %s: %w", revision, err)
	}
	var digest string
	var size int64
	write := atomicfile.WriteNamedCache
	if s.bootID == "" {
		write = atomicfile.WriteNamed
	}
	var written map[string]member
	_, err = write(dir, func(w io.Writer) (string, error) {
		hash := sha256.New()
		n, members, err := writeTarball(io.MultiWriter(w, hash), files, tree, &budget{Limits: s.Limits}, s.members.of(dir))
		if werr := tree.wait(); err == nil {
			err = werr
		}
		digest, size, written = hex.EncodeToString(hash.Sum(nil)), n, members
		return digest + ".tar.gz", err
	})
	if err != nil {
		return nil, fmt.Errorf("writing artifact for %s: %w", revision, err)
	}
	s.members.keep(dir, &members{tarball: filepath.Join(dir, digest+".tar.gz"), byKey: written})
	if err := s.keepTree(tmp, filepath.Join(dir, digest), tree.out); err != nil {
		return nil, fmt.Errorf("writing artifact for %s: %w", revision, err)
	}
	rel := objectDir + "/" + digest + ".tar.gz"
	return &meta.Artifact{
		Path:           rel,
		URL:            s.BaseURL + "/" + rel,
		Revision:       revision,
		Digest:         "sha256:" + digest,
		LastUpdateTime: metav1.NewTime(time.Now().Truncate(time.Second)),
		Size:           &size,
	}, nil
}

// startTree returns a temporary directory to write a tree in: the spare
// tree, with its manifest, when garbage collection left one.
func (s *Storage) startTree(dir string) (string, manifest, error) {
	tmp, err := os.MkdirTemp(dir, ".extract-*")
	if err != nil {
		return "", nil, err
	}
	spare := filepath.Join(dir, spareTree)
	m, ok := s.manifests.LoadAndDelete(spare)
	if !ok {
		// Left by an earlier process: what it holds is unknown.
		return tmp, nil, os.RemoveAll(spare)
	}
	if err := os.Remove(tmp); err != nil {
		return "", nil, err
	}
	if err := os.Rename(spare, tmp); err != nil {
		return tmp, nil, os.Mkdir(tmp, 0o700)
	}
	return tmp, m.(manifest), nil
}

func paths(files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}

// keepTree moves a written tree to its final place unless a reader has
// extracted the same digest there already.
func (s *Storage) keepTree(tmp, dir string, m manifest) error {
	lock := s.digestLock(dir)
	lock.Lock()
	defer lock.Unlock()
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	s.manifests.Store(dir, m)
	return s.markWritten(dir)
}

// Has reports whether the artifact's tarball is on disk.
func (s *Storage) Has(a *meta.Artifact) bool {
	if a == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(s.Root, a.Path))
	return err == nil
}

// Dir returns a directory holding the artifact's files, extracting the
// tarball the first time. Readers must not modify it: it is shared by every
// build of the same revision.
func (s *Storage) Dir(a *meta.Artifact) (string, error) {
	tarball := filepath.Join(s.Root, a.Path)
	dir := strings.TrimSuffix(tarball, ".tar.gz")
	lock := s.digestLock(dir)
	lock.Lock()
	defer lock.Unlock()
	if _, err := os.Stat(dir); err == nil && s.writtenThisBoot(dir) {
		return dir, nil
	}
	if err := verifyDigest(tarball, a.Digest); err != nil {
		// Has now says it is missing, so the source stores it again.
		_ = os.Remove(tarball)
		return "", fmt.Errorf("artifact %s (revision %s) is damaged, probably by a power failure, and was removed; "+
			"the source stores it again on its next reconcile: %w", a.Path, a.Revision, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".extract-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	m, err := extract(tarball, tmp, &budget{Limits: s.Limits})
	if err != nil {
		return "", fmt.Errorf("extracting artifact %s (revision %s): %w", a.Path, a.Revision, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	s.manifests.Store(dir, m)
	return dir, s.markWritten(dir)
}

func (s *Storage) digestLock(key string) *sync.Mutex {
	s.extractMu.Lock()
	defer s.extractMu.Unlock()
	l, ok := s.extracting[key]
	if !ok {
		l = &sync.Mutex{}
		s.extracting[key] = l
	}
	return l
}

// GarbageCollect removes every artifact of the object directory that is not
// in keep (artifact paths), along with its extracted tree.
func (s *Storage) GarbageCollect(objectDir string, keep ...*meta.Artifact) error {
	dir := filepath.Join(s.Root, objectDir)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, a := range keep {
		if a != nil {
			base := filepath.Base(a.Path)
			tree := strings.TrimSuffix(base, ".tar.gz")
			kept[base], kept[tree], kept[bootMarker(tree)] = true, true, true
		}
	}
	for _, e := range entries {
		if kept[e.Name()] || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		s.trusted.Delete(p)
		if s.setAside(dir, p) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// setAside makes tree the spare tree of dir, unless there is one already
// or what it holds is unknown.
func (s *Storage) setAside(dir, tree string) bool {
	m, ok := s.manifests.LoadAndDelete(tree)
	if !ok {
		// Written by an earlier process of this boot: its tarball says
		// what it holds. Without this, the first pushes after a restart
		// each wrote the whole tree (0.4-0.6 s for 4000 files).
		if !s.writtenThisBoot(tree) {
			return false
		}
		var err error
		if m, err = manifestOf(tree+".tar.gz", s.Limits); err != nil {
			return false
		}
	}
	spare := filepath.Join(dir, spareTree)
	if _, err := os.Lstat(spare); err == nil {
		return false
	}
	if err := os.Rename(tree, spare); err != nil {
		return false
	}
	s.manifests.Store(spare, m)
	return true
}

// Remove deletes every artifact of the object directory.
func (s *Storage) Remove(objectDir string) error {
	dir := filepath.Join(s.Root, objectDir)
	s.manifests.Range(func(k, _ any) bool {
		if filepath.Dir(k.(string)) == dir {
			s.manifests.Delete(k)
		}
		return true
	})
	s.members.forget(dir)
	return os.RemoveAll(dir)
}

// Handler serves the artifact tarballs over HTTP, as Flux's source-controller does.
func (s *Storage) Handler() *fileServer { return &fileServer{root: s.Root} }
