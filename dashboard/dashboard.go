// Package dashboard serves strata's read-only web dashboard: what the
// controller's caches hold about disks, pools, nodes and claims, drawn by
// the server (html/template, embedded), kept live with server-sent
// events, behind an authentication of the caller (docs/dashboard.md).
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/storage/volumeusage"
)

//go:embed web
var web embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"age":     func(d time.Duration) string { return d.Round(time.Second).String() },
	"columns": func() []string { return []string{"name", "class", "backend", "node", "size", "used", "phase"} },
}).ParseFS(web, "web/*.html"))

// Server is the dashboard.
type Server struct {
	// Reader reads the controller's caches: no view lists the API server.
	Reader client.Reader
	// Auth decides who sees what.
	Auth Authorizer
	// Live tells open pages that something they show changed.
	Live *Broker
	// GitOps serves the engine's page (Kustomizations, GitRepositories):
	// only with strata's engine, since in storage-only mode the
	// controller reads none of Flux's objects.
	GitOps bool
	// LeaseNamespace holds the agents' node Leases (the controller's
	// --lease-namespace); empty is DefaultLeaseNamespace.
	LeaseNamespace string
	// Usage is each claim's used bytes as its node measured them; nil:
	// not read.
	Usage interface {
		Of(volumeusage.Claim) (volumeusage.Usage, bool)
	}
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	Log logr.Logger

	built memo
}

// Handler routes the dashboard's pages, its assets and its live stream,
// each with the security headers.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(web, "web/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.Handle("GET /events", s.authenticated(s.Live))
	mux.Handle("GET /{$}", s.page("overview", func(r *http.Request, u User) (any, error) { return s.overviewOf(r.Context(), u) }))
	if s.GitOps {
		mux.Handle("GET /gitops", s.page("gitops", func(r *http.Request, u User) (any, error) { return s.gitOpsOf(r.Context(), u) }))
	}
	mux.Handle("GET /volumes", s.page("volumes", func(r *http.Request, u User) (any, error) {
		return s.volumesOf(r.Context(), u, volumeQueryOf(r.URL.Query()))
	}))
	mux.Handle("GET /failovers", s.page("failovers", func(r *http.Request, u User) (any, error) { return s.failoversOf(r.Context(), u) }))
	mux.Handle("GET /buildbarn", s.page("buildbarn", func(r *http.Request, u User) (any, error) { return s.buildbarnOf(r.Context(), u) }))
	return secure(mux)
}

// secure sets the headers every answer carries: no script but the
// dashboard's own file, no framing, no sniffing, no referrer.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// page serves one page to an authenticated caller: build reads what the
// caller may see, from the caches; the template named page draws it, or,
// asked with ?fragment=1 (the live update), its main part only.
func (s *Server) page(page string, build func(*http.Request, User) (any, error)) http.Handler {
	return s.authenticated(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		html, err := s.drawn(page, r, build)
		if err != nil {
			http.Error(w, "reading the cluster: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(html)
	}))
}

// drawn is the page drawn for the request's user: kept from before when
// nothing changed since (memo), else built and drawn now.
func (s *Server) drawn(page string, r *http.Request, build func(*http.Request, User) (any, error)) ([]byte, error) {
	u := userOf(r.Context())
	remember := s.Live != nil && s.Live.fed.Load()
	var key string
	var gen uint64
	now := time.Now()
	if remember {
		key, gen = memoKey(page, u, r), s.Live.gen.Load()
		if html, ok := s.built.get(key, gen, now); ok {
			return html, nil
		}
	}
	data, err := build(r, u)
	if err != nil {
		return nil, err
	}
	name := page
	if r.URL.Query().Get("fragment") == "1" {
		name = page + "-main"
	}
	var html bytes.Buffer
	if err := pages.ExecuteTemplate(&html, name, data); err != nil {
		return nil, fmt.Errorf("drawing the %s page: %w", page, err)
	}
	if remember {
		s.built.put(key, gen, now, html.Bytes())
	}
	return html.Bytes(), nil
}

// Start keeps the live stream's broker running until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	s.Live.Run(ctx)
	return nil
}
