package dashboard

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// The memo serves a page until the generation moves or it is a second
// old, and keeps no more than its byte bound.
func TestTheMemoKeepsPagesUntilAChangeAndWithinItsBound(t *testing.T) {
	var m memo
	now := time.Now()
	m.put("a", 1, now, []byte("page a"))
	if got, ok := m.get("a", 1, now.Add(500*time.Millisecond)); !ok || string(got) != "page a" {
		t.Fatalf("a page kept half a second ago at the same generation is not served: %q %v", got, ok)
	}
	if _, ok := m.get("a", 2, now); ok {
		t.Error("a page is served after a change")
	}
	if _, ok := m.get("a", 1, now.Add(2*time.Second)); ok {
		t.Error("a page two seconds old is served")
	}
	big := bytes.Repeat([]byte("x"), memoMaxBytes/3+1)
	for _, k := range []string{"b", "c", "d"} {
		m.put(k, 1, now, big)
	}
	if _, ok := m.get("d", 1, now); ok || m.bytes > memoMaxBytes {
		t.Errorf("the memo holds %d bytes, over its bound of %d", m.bytes, memoMaxBytes)
	}
	m.put("e", 3, now, []byte("new"))
	if len(m.entries) != 1 || m.bytes != 4 {
		t.Errorf("a new generation kept %d pages (%d bytes) from before", len(m.entries)-1, m.bytes-4)
	}
	// Many small pages under long keys (a caller's made-up queries) stay
	// within the bound too.
	for i := range 100 {
		m.put(fmt.Sprintf("%d%s", i, bytes.Repeat([]byte("q"), 100<<10)), 3, now, []byte("small page"))
	}
	if m.bytes > memoMaxBytes || len(m.entries) > 1+memoMaxBytes/(100<<10) {
		t.Errorf("100 pages under 100 KiB keys: %d kept, %d bytes, over the bound of %d", len(m.entries), m.bytes, memoMaxBytes)
	}
}
