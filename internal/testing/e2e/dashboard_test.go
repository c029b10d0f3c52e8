package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/podforward"
)

// timelineWatch follows the dashboard's failovers page as an open page
// does: told of each change on /events, it fetches the page's main part
// again, and notes when each detection of a Failover first shows.
type timelineWatch struct {
	mu    sync.Mutex
	shown map[string]time.Time // detection time as the page writes it → when it first showed
}

// watchTimeline opens the chart's dashboard through a port-forward to the
// controller and watches the failovers page for the Failover ns/name.
func watchTimeline(t *testing.T, c *cluster.Cluster, ns, name string) *timelineWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	target := podforward.Target{Namespace: namespace, Selector: "app.kubernetes.io/name=strata,app.kubernetes.io/component=controller", Port: 9080}
	addr, err := podforward.Forward(ctx, c.Config, target, 0, 2*time.Minute, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	w := &timelineWatch{shown: map[string]time.Time{}}
	detected := regexp.MustCompile(`data-failover="` + regexp.QuoteMeta(ns+"/"+name) + `"(?s:.*?)data-detected="([^"]+)"`)
	go func() {
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			if lines.Text() != "event: changed" {
				continue
			}
			page, err := http.Get("http://" + addr + "/failovers?fragment=1")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(page.Body)
			page.Body.Close()
			if m := detected.FindSubmatch(body); m != nil {
				w.mu.Lock()
				if _, seen := w.shown[string(m[1])]; !seen {
					w.shown[string(m[1])] = time.Now()
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// shownAfter waits for the detection at detected to show on the page and
// says how long after the detection it did.
func (w *timelineWatch) shownAfter(t *testing.T, detected time.Time) time.Duration {
	t.Helper()
	key := detected.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		at, ok := w.shown[key]
		w.mu.Unlock()
		if ok {
			return at.Sub(detected)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	t.Fatalf("the dashboard's failovers page never showed the failover detected at %s", key)
	return 0
}
