package oci

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// hostileRegistry answers the tag list with whatever pages says, for
// the page asked (0 the first).
func hostileRegistry(t *testing.T, page func(w http.ResponseWriter, r *http.Request, n int)) *registry {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		n := 0
		_, _ = fmt.Sscan(r.URL.Query().Get("last"), &n) // the first page has none
		page(w, r, n)
	}))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://")+"/apps", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return &registry{repo: repo}
}

// A registry that pages without end is read only up to the limit.
func TestATagListWithoutEndStopsAtTheLimit(t *testing.T) {
	pages := 0
	g := hostileRegistry(t, func(w http.ResponseWriter, r *http.Request, n int) {
		pages++
		var tags []string
		for i := range 1000 {
			tags = append(tags, fmt.Sprintf(`"1.0.%d"`, n+i))
		}
		w.Header().Set("Link", fmt.Sprintf(`</v2/apps/tags/list?n=1000&last=%d>; rel="next"`, n+1000))
		fmt.Fprintf(w, `{"name":"apps","tags":[%s]}`, strings.Join(tags, ","))
	})
	_, err := g.tags(context.Background())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d tags", maxTags)) {
		t.Fatalf("error %v", err)
	}
	if pages > maxTags/1000+1 {
		t.Fatalf("read %d pages, past the limit", pages)
	}
}

// A registry that ignores the page size and sends one endless page is
// cut at the page limit, with an error, not read into memory.
func TestAnEndlessTagPageIsCut(t *testing.T) {
	g := hostileRegistry(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		fmt.Fprint(w, `{"name":"apps","tags":[`)
		chunk := strings.Repeat(`"1.0.0-padding-padding-padding",`, 1000)
		for written := 0; written < 4*tagPageLimit; written += len(chunk) {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
	})
	_, err := g.tags(context.Background())
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("error %v", err)
	}
}
