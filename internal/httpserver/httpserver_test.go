package httpserver_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/internal/testing/testenv"
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

// Serve answers until its context ends, then returns without an error; a
// status recorder sees the code a handler wrote.
func TestServeUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	var seen atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rec := httpserver.NewStatusRecorder(w)
		rec.WriteHeader(http.StatusTeapot)
		seen.Store(int32(rec.Status))
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpserver.Serve(ctx, addr, nil, h) }()
	testenv.Eventually(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + addr)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	})
	if seen.Load() != http.StatusTeapot {
		t.Fatalf("the recorder saw %d", seen.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after its context ended: %v", err)
	}
}
