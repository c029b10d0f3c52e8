// Package cache is a node's cache of VM disk images, keyed by content:
// each entry holds an image's bytes, decompressed, in a file named by the
// SHA-256 its source declared for the object and by how it was
// decompressed, and is made only once the downloaded bytes matched it.
// One object read as gzip and read as stored are two entries: whoever
// names it with another suffix gets an entry of its own, never changes
// the one another request reads. An entry is handed only to a request from
// a source that once delivered those bytes (its URL with the credential
// that read it): knowing a digest gets nothing, and a request from
// another source downloads the image again and is answered only if its
// bytes match. A fill writes a temporary file, locked while it is
// written, syncs it and renames it into place, so a crash leaves no
// partial entry; concurrent requests for one image from one source
// share one download; entries beyond the size bound go least recently
// used first, never while in use.
package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/atomicfile"
)

// entryPrefix names entry files: entryPrefix + the digest's hex.
const entryPrefix = "sha256-"

// tempPrefix names the files of fills in progress; Open removes those
// a crash left. sourcesPrefix names the file beside an entry listing the
// sources that delivered it, one per line.
const (
	tempPrefix    = ".tmp-"
	sourcesPrefix = "sources-"
)

// Cache is one node's image cache in a directory of its own.
type Cache struct {
	dir string
	max int64
	now func() time.Time

	mu      sync.Mutex
	entries map[entryKey]*entry
	fills   map[fillKey]*fill
}

// entryKey is what an entry holds: the object of digest, decompressed
// as compression says.
type entryKey struct {
	digest      Digest
	compression Compression
}

// name is the entry's file name: entryPrefix, the digest's hex, and
// "." and the compression for a compressed object.
func (k entryKey) name() string {
	if k.compression == Uncompressed {
		return k.digest.Hex()
	}
	return k.digest.Hex() + "." + string(k.compression)
}

// parseEntryName reads name (entryPrefix cut off) back into a key.
func parseEntryName(name string) (entryKey, bool) {
	hex, comp, _ := strings.Cut(name, ".")
	d, err := ParseDigest(hex)
	if err != nil || d.Hex() != hex {
		return entryKey{}, false
	}
	switch c := Compression(comp); c {
	case Uncompressed, Gzip, Zstd, Xz:
		return entryKey{d, c}, true
	}
	return entryKey{}, false
}

// entry is a cached image: its size, when it was last used, how many
// Handles hold it, and the sources that delivered its bytes.
type entry struct {
	size    int64
	used    time.Time
	holders int
	sources map[string]bool
}

// fillKey is one download: an image from one source.
type fillKey struct {
	entry  entryKey
	source string
}

// Source is where a Get downloads an image from when it must.
type Source struct {
	// Key names the source and the right it reads with: the image's URL
	// and the identity of its credential. Never a secret: it is stored.
	Key         string
	Compression Compression
	Fetch       Fetch
	// MaxBytes bounds the image, decompressed, and what is downloaded
	// of it; the cache's own bound applies too. 0: only the cache's.
	MaxBytes int64
}

// fill is a download in progress, which every request for its digest
// waits for.
type fill struct {
	done     chan struct{}
	err      error
	finished bool
	waiters  int
	cancel   context.CancelFunc
}

// Open opens the cache in dir, bounded to maxBytes (0: no bound). It
// removes what fills a crash cut short left, and takes each entry's last
// use from its file's modification time.
func Open(dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("image cache %s: %w", dir, err)
	}
	c := &Cache{dir: dir, max: maxBytes, now: time.Now, entries: map[entryKey]*entry{}, fills: map[fillKey]*fill{}}
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("image cache %s: %w", dir, err)
	}
	for _, f := range files {
		if err := c.adopt(f); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// adopt takes a file found at Open into the cache, or removes a fill's
// leftover that no process still writes.
func (c *Cache) adopt(f fs.DirEntry) error {
	path := filepath.Join(c.dir, f.Name())
	if strings.HasPrefix(f.Name(), tempPrefix) {
		return removeAbandoned(path)
	}
	name, ok := strings.CutPrefix(f.Name(), entryPrefix)
	if !ok || !f.Type().IsRegular() {
		return nil // not the cache's
	}
	d, ok := parseEntryName(name)
	if !ok {
		return nil // a file named like an entry but not one is not the cache's
	}
	info, err := f.Info()
	if err != nil {
		return err
	}
	sources, err := c.readSources(d)
	if err != nil {
		return err
	}
	c.entries[d] = &entry{size: info.Size(), used: info.ModTime(), sources: sources}
	return nil
}

// removeAbandoned removes a fill's temporary file unless a process still
// writes it: its writer holds an exclusive lock on it while it lives.
func removeAbandoned(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil //nolint:nilerr // locked: another fill is writing it
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s, an image download a crash cut short: %w", path, err)
	}
	return nil
}

func (c *Cache) sourcesPath(d entryKey) string { return filepath.Join(c.dir, sourcesPrefix+d.name()) }

// readSources reads the sources recorded for an entry; an entry without
// them (cached before they were recorded) has none, and is downloaded
// again by its next request.
func (c *Cache) readSources(d entryKey) (map[string]bool, error) {
	data, err := os.ReadFile(c.sourcesPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	sources := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" {
			sources[line] = true
		}
	}
	return sources, nil
}

// addSourceLocked records that source delivered the entry's bytes. A
// record lost to a crash only costs that source a download.
func (c *Cache) addSourceLocked(d entryKey, e *entry, source string) {
	if e.sources[source] {
		return
	}
	e.sources[source] = true
	var lines strings.Builder
	for s := range e.sources {
		lines.WriteString(s + "\n")
	}
	_ = atomicfile.Write(c.sourcesPath(d), []byte(lines.String()))
}

// Handle is an entry held for use: the cache does not evict it until
// Release.
type Handle struct {
	Digest Digest
	// Path is the image's decompressed bytes.
	Path string
	Size int64
	// Hit says the entry was there before this request.
	Hit bool

	c       *Cache
	key     entryKey
	release sync.Once
}

// Release lets the cache evict the entry again, and counts now as its
// last use.
func (h *Handle) Release() {
	h.release.Do(func() {
		c := h.c
		c.mu.Lock()
		defer c.mu.Unlock()
		if e, ok := c.entries[h.key]; ok {
			e.holders--
			c.touchLocked(h.key, e)
		}
		c.evictLocked()
	})
}

// Fetch writes an image object's bytes, as stored (compressed or not),
// to w; a fill gives it a context that ends when no request waits for it
// any more.
type Fetch func(ctx context.Context, w io.Writer) error

// Get returns the entry whose object has digest want, held, filling it
// from src first when it is missing or src never delivered it: the
// object's bytes are hashed as they arrive, decompressed into a
// temporary file, and kept only when their digest is want. Concurrent
// Gets for one digest from one source share one fill. A Get whose ctx
// ends stops waiting at once; the fill stops when no Get waits for it.
func (c *Cache) Get(ctx context.Context, want Digest, src Source) (*Handle, error) {
	c.mu.Lock()
	at := entryKey{want, src.Compression}
	if e, ok := c.entries[at]; ok && e.sources[src.Key] {
		e.holders++
		c.touchLocked(at, e)
		c.mu.Unlock()
		return c.handle(at, e, true), nil
	}
	key := fillKey{at, src.Key}
	f, ok := c.fills[key]
	if !ok {
		f = c.startFill(key, src)
	}
	f.waiters++
	c.mu.Unlock()
	select {
	case <-f.done:
		return c.filled(at, f)
	case <-ctx.Done():
		return nil, c.leave(at, f, ctx.Err())
	}
}

// filled is a waiter's outcome of a fill: the entry, which the fill
// already counted the waiter a holder of.
func (c *Cache) filled(want entryKey, f *fill) (*Handle, error) {
	if f.err != nil {
		return nil, f.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handle(want, c.entries[want], false), nil
}

// leave takes a waiter whose context ended off a fill, which stops when
// it was the last. A fill that finished meanwhile counted it a holder:
// that hold is given back.
func (c *Cache) leave(want entryKey, f *fill, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.finished {
		if e, ok := c.entries[want]; ok && f.err == nil {
			e.holders--
			c.evictLocked()
		}
		return err
	}
	f.waiters--
	if f.waiters == 0 {
		f.cancel()
	}
	return err
}

func (c *Cache) handle(k entryKey, e *entry, hit bool) *Handle {
	return &Handle{Digest: k.digest, Path: c.path(k), Size: e.size, Hit: hit, c: c, key: k}
}

// startFill downloads an image from a source in the background, for
// every request that waits for it.
func (c *Cache) startFill(key fillKey, src Source) *fill {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fill{done: make(chan struct{}), cancel: cancel}
	c.fills[key] = f
	go func() {
		defer cancel()
		size, err := c.download(ctx, key.entry, src, c.bound(src))
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.fills, key)
		if err == nil {
			// Every waiter holds it now, before anything may evict it.
			e, ok := c.entries[key.entry]
			if !ok {
				e = &entry{sources: map[string]bool{}}
				c.entries[key.entry] = e
			}
			e.size, e.used, e.holders = size, c.now(), e.holders+f.waiters
			c.addSourceLocked(key.entry, e, key.source)
			c.evictLocked()
		}
		f.err, f.finished = err, true
		close(f.done)
	}()
	return f
}

// bound is what a download from src may decompress to: the smaller of
// the source's and the cache's bounds, 0 for none.
func (c *Cache) bound(src Source) int64 {
	switch {
	case src.MaxBytes > 0 && c.max > 0:
		return min(src.MaxBytes, c.max)
	case src.MaxBytes > 0:
		return src.MaxBytes
	}
	return c.max
}

// touchLocked records a use of the entry, in memory and in its file's
// modification time, so that the order of use outlives a restart.
func (c *Cache) touchLocked(d entryKey, e *entry) {
	e.used = c.now()
	_ = os.Chtimes(c.path(d), e.used, e.used) // a lost time only makes it look older
}

// evictLocked removes the least recently used entries no one holds
// until the cache is within its bound. Entries in use stay even when
// that leaves the cache above it.
func (c *Cache) evictLocked() {
	if c.max <= 0 {
		return
	}
	for c.sizeLocked() > c.max {
		var oldest *entryKey
		for d, e := range c.entries {
			if e.holders == 0 && (oldest == nil || e.used.Before(c.entries[*oldest].used)) {
				oldest = &d
			}
		}
		if oldest == nil {
			return
		}
		if err := os.Remove(c.path(*oldest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return // kept, and counted, until a later eviction can remove it
		}
		_ = os.Remove(c.sourcesPath(*oldest))
		delete(c.entries, *oldest)
	}
}

func (c *Cache) sizeLocked() int64 {
	var total int64
	for _, e := range c.entries {
		total += e.size
	}
	return total
}

// Size is the bytes the cache's entries hold.
func (c *Cache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sizeLocked()
}

// Has says whether an entry of the object of digest d is cached, read
// with any compression.
func (c *Cache) Has(d Digest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.digest == d {
			return true
		}
	}
	return false
}

func (c *Cache) path(d entryKey) string { return filepath.Join(c.dir, entryPrefix+d.name()) }
