package dashboard

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// memoMaxAge bounds how long a drawn page is served again: its ages
// (Leases, data ages, waiting claims) are as of when it was drawn.
const memoMaxAge = time.Second

// memoMaxBytes bounds the pages kept at once, so that what the memo
// holds stays small beside the caches whatever is asked.
const memoMaxBytes = 4 << 20

// memo keeps drawn pages until the informers tell of a change (the
// broker's generation moves) or memoMaxAge passes, so a burst of views,
// or many open pages refreshing after one change, draws each page once.
// It is used only where Watch feeds the broker: without informers no
// change would ever be told.
type memo struct {
	mu      sync.Mutex
	gen     uint64
	entries map[string]memoEntry
	bytes   int
}

type memoEntry struct {
	html []byte
	at   time.Time
}

// memoKey names a page as a user asked for it.
func memoKey(page string, u User, r *http.Request) string {
	return strings.Join([]string{page, u.Name, strings.Join(u.Groups, ","), r.URL.RawQuery}, "\x00")
}

// get returns the page kept under key at generation gen, if fresh.
func (m *memo) get(key string, gen uint64, now time.Time) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || m.gen != gen || now.Sub(e.at) > memoMaxAge {
		return nil, false
	}
	return e.html, true
}

// put keeps a page drawn at generation gen. A newer generation drops
// every page kept before it; stale pages go as new ones come; past
// memoMaxBytes nothing more is kept until they do.
func (m *memo) put(key string, gen uint64, now time.Time, html []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen || m.entries == nil {
		m.gen, m.entries, m.bytes = gen, map[string]memoEntry{}, 0
	}
	for k, e := range m.entries {
		if now.Sub(e.at) > memoMaxAge || k == key {
			delete(m.entries, k)
			m.bytes -= len(k) + len(e.html)
		}
	}
	// The key counts too: it holds the caller's query, as long as the
	// server lets a URL be.
	if size := len(key) + len(html); m.bytes+size <= memoMaxBytes {
		m.entries[key] = memoEntry{html: html, at: now}
		m.bytes += size
	}
}
