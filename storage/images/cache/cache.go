// Package cache is a node's cache of VM disk images, keyed by content:
// each entry holds an image's bytes, decompressed, in a file named by the
// SHA-256 its source declared for the object, and is made only once the
// downloaded bytes matched it. A fill writes a temporary file, syncs it
// and renames it into place, so a crash leaves no partial entry;
// concurrent requests for one image share one download; entries beyond
// the size bound go least recently used first, never while in use.
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
)

// entryPrefix names entry files: entryPrefix + the digest's hex.
const entryPrefix = "sha256-"

// tempPrefix names the files of fills in progress; Open removes those
// a crash left.
const tempPrefix = ".tmp-"

// Cache is one node's image cache in a directory of its own.
type Cache struct {
	dir string
	max int64
	now func() time.Time

	mu      sync.Mutex
	entries map[Digest]*entry
	fills   map[Digest]*fill
}

// entry is a cached image: its size, when it was last used, and how many
// Handles hold it.
type entry struct {
	size    int64
	used    time.Time
	holders int
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
	c := &Cache{dir: dir, max: maxBytes, now: time.Now, entries: map[Digest]*entry{}, fills: map[Digest]*fill{}}
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
// leftover.
func (c *Cache) adopt(f fs.DirEntry) error {
	path := filepath.Join(c.dir, f.Name())
	if strings.HasPrefix(f.Name(), tempPrefix) {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("removing %s, an image download a crash cut short: %w", path, err)
		}
		return nil
	}
	hex, ok := strings.CutPrefix(f.Name(), entryPrefix)
	if !ok || !f.Type().IsRegular() {
		return nil // not the cache's
	}
	d, err := ParseDigest(hex)
	if err != nil {
		return nil //nolint:nilerr // a file named like an entry but not one is not the cache's
	}
	info, err := f.Info()
	if err != nil {
		return err
	}
	c.entries[d] = &entry{size: info.Size(), used: info.ModTime()}
	return nil
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
	release sync.Once
}

// Release lets the cache evict the entry again, and counts now as its
// last use.
func (h *Handle) Release() {
	h.release.Do(func() {
		c := h.c
		c.mu.Lock()
		defer c.mu.Unlock()
		if e, ok := c.entries[h.Digest]; ok {
			e.holders--
			c.touchLocked(h.Digest, e)
		}
		c.evictLocked()
	})
}

// Fetch writes an image object's bytes, as stored (compressed or not),
// to w; a fill gives it a context that ends when no request waits for it
// any more.
type Fetch func(ctx context.Context, w io.Writer) error

// Get returns the entry whose object has digest want, held, filling it
// with fetch first when it is missing: the object's bytes are hashed as
// they arrive, decompressed by comp into a temporary file, and kept only
// when their digest is want. Concurrent Gets for one digest share one
// fill. A Get whose ctx ends stops waiting at once; the fill stops when
// no Get waits for it.
func (c *Cache) Get(ctx context.Context, want Digest, comp Compression, fetch Fetch) (*Handle, error) {
	c.mu.Lock()
	if e, ok := c.entries[want]; ok {
		e.holders++
		c.touchLocked(want, e)
		c.mu.Unlock()
		return c.handle(want, e, true), nil
	}
	f, ok := c.fills[want]
	if !ok {
		f = c.startFill(want, comp, fetch)
	}
	f.waiters++
	c.mu.Unlock()
	select {
	case <-f.done:
		return c.filled(want, f)
	case <-ctx.Done():
		return nil, c.leave(want, f, ctx.Err())
	}
}

// filled is a waiter's outcome of a fill: the entry, which the fill
// already counted the waiter a holder of.
func (c *Cache) filled(want Digest, f *fill) (*Handle, error) {
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
func (c *Cache) leave(want Digest, f *fill, err error) error {
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

func (c *Cache) handle(d Digest, e *entry, hit bool) *Handle {
	return &Handle{Digest: d, Path: c.path(d), Size: e.size, Hit: hit, c: c}
}

// startFill downloads want in the background, for every request that
// waits for it.
func (c *Cache) startFill(want Digest, comp Compression, fetch Fetch) *fill {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fill{done: make(chan struct{}), cancel: cancel}
	c.fills[want] = f
	go func() {
		defer cancel()
		size, err := c.download(ctx, want, comp, fetch)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.fills, want)
		if err == nil {
			// Every waiter holds it now, before anything may evict it.
			c.entries[want] = &entry{size: size, used: c.now(), holders: f.waiters}
			c.evictLocked()
		}
		f.err, f.finished = err, true
		close(f.done)
	}()
	return f
}

// touchLocked records a use of the entry, in memory and in its file's
// modification time, so that the order of use outlives a restart.
func (c *Cache) touchLocked(d Digest, e *entry) {
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
		var oldest Digest
		for d, e := range c.entries {
			if e.holders == 0 && (oldest == "" || e.used.Before(c.entries[oldest].used)) {
				oldest = d
			}
		}
		if oldest == "" {
			return
		}
		if err := os.Remove(c.path(oldest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return // kept, and counted, until a later eviction can remove it
		}
		delete(c.entries, oldest)
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

// Has says whether an entry for d is cached.
func (c *Cache) Has(d Digest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[d]
	return ok
}

func (c *Cache) path(d Digest) string { return filepath.Join(c.dir, entryPrefix+d.Hex()) }
