package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/strata-gitops/strata/internal/httpserver"
)

func TestTheServerBoundsTimeAndConcurrency(t *testing.T) {
	srv := httpserver.New(":0", http.NotFoundHandler())
	if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 {
		t.Fatalf("server timeouts: header %v, read %v, write %v, idle %v; want all set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	h := httptest.NewServer(httpserver.LimitInFlight(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}), 1))
	defer h.Close()
	first := make(chan int)
	go func() {
		resp, err := http.Get(h.URL)
		if err != nil {
			first <- 0
			return
		}
		_ = resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-entered
	resp, err := http.Get(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a request over the bound got %d, want 503 with Retry-After", resp.StatusCode)
	}
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the request within the bound got %d", code)
	}
}
