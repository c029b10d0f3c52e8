// Package httpserver makes strata's HTTP servers with the same limits:
// a deadline on every phase of a connection, so that a slow or stuck
// client holds nothing for long, and a bound on requests served at once.
package httpserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// MaxInFlight bounds the requests a server serves at once; more are
// answered 503 with Retry-After.
const MaxInFlight = 64

// New is an HTTP server of h on addr with strata's deadlines and bound.
func New(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: LimitInFlight(h, MaxInFlight),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute}
}

// LimitInFlight answers 503 to a request that arrives while n others are
// being served.
func LimitInFlight(h http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"reason": "Busy",
				"error": fmt.Sprintf("the server is serving %d requests already; retry", n)})
		}
	})
}

// Serve serves h on addr, with TLS when tlsConfig is set, until ctx ends;
// then it gives requests in flight 5 seconds to finish.
func Serve(ctx context.Context, addr string, tlsConfig *tls.Config, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := New(addr, h)
	srv.TLSConfig = tlsConfig
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if tlsConfig != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// StatusRecorder remembers the status code a handler answered with.
type StatusRecorder struct {
	http.ResponseWriter
	Status int
}

// NewStatusRecorder records what is written to w; 200 until told.
func NewStatusRecorder(w http.ResponseWriter) *StatusRecorder {
	return &StatusRecorder{ResponseWriter: w, Status: http.StatusOK}
}

// WriteHeader implements http.ResponseWriter.
func (r *StatusRecorder) WriteHeader(code int) {
	r.Status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets streamed responses through.
func (r *StatusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath, so a
// handler of a long stream can lift the server's deadlines.
func (r *StatusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
