package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxWatchers bounds the pages kept live at once; past it a page is told
// to come back later (it still loads, without live updates).
const maxWatchers = 100

// Broker tells the open pages, through server-sent events, that what
// they show changed; the page then fetches its main part again. Changes
// that come together are sent as one.
type Broker struct {
	// gen counts the changes told; fed says Watch feeds the broker, so
	// that a page built at a generation stays right until it moves.
	gen      atomic.Uint64
	fed      atomic.Bool
	mu       sync.Mutex
	watchers map[chan struct{}]struct{}
	changed  chan struct{}
}

// NewBroker makes a broker; Run delivers its changes.
func NewBroker() *Broker {
	return &Broker{watchers: map[chan struct{}]struct{}{}, changed: make(chan struct{}, 1)}
}

// Changed says something shown changed; it never blocks.
func (b *Broker) Changed() {
	b.gen.Add(1)
	select {
	case b.changed <- struct{}{}:
	default: // one is already waiting to go out
	}
}

// coalesce is how long a change waits for the ones that come with it.
const coalesce = 100 * time.Millisecond

// Run sends the changes to every watcher until ctx ends.
func (b *Broker) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.changed:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(coalesce):
		}
		b.mu.Lock()
		for w := range b.watchers {
			select {
			case w <- struct{}{}:
			default:
			}
		}
		b.mu.Unlock()
	}
}

// ServeHTTP streams "changed" events to one page until it goes.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	mine := make(chan struct{}, 1)
	b.mu.Lock()
	if len(b.watchers) >= maxWatchers {
		b.mu.Unlock()
		http.Error(w, "too many live pages; reload later", http.StatusServiceUnavailable)
		return
	}
	b.watchers[mine] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.watchers, mine)
		b.mu.Unlock()
	}()
	// A stream outlives the server's write deadline, which is for pages.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	beat := time.NewTicker(15 * time.Second)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-mine:
			fmt.Fprint(w, "event: changed\ndata: 1\n\n")
		case <-beat.C:
			fmt.Fprint(w, ": still here\n\n")
		}
		flusher.Flush()
	}
}
