package dashboard

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/reconciler/graph"
)

// What the cluster says is text on the GitOps page, never markup, in the
// parts drawn by hand as in those html/template draws: a message, a
// reason or a name that holds markup is written escaped.
func TestTheGitOpsPageEscapesWhatTheClusterSays(t *testing.T) {
	hostile := `"><script>alert('x')</script><b a="`
	g := graph.Graph{{Namespace: "ns", Name: hostile}: nil}
	waves, blocked := g.Waves()
	views := []KustomizationView{{Key: "ns/" + hostile, State: hostile, Reason: hostile, Message: hostile, Revision: hostile, Protected: hostile,
		Events: []EventView{{Type: hostile, Reason: hostile, Message: hostile, At: time.Now()}}}}
	page := GitOps{Graph: drawGraph(g, waves, blocked, views), Kustomizations: views, At: time.Now()}
	var out bytes.Buffer
	if err := pages.ExecuteTemplate(&out, "gitops-main", page); err != nil {
		t.Fatal(err)
	}
	body := out.String()
	if strings.Contains(body, "<script") || strings.Contains(body, `<b a=`) {
		t.Fatalf("a value from the cluster is drawn as markup:\n%s", body)
	}
	if want := "&#34;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"; strings.Count(body, want) < 10 {
		t.Fatalf("the values are not all shown, escaped (%d of 10):\n%s", strings.Count(body, want), body)
	}
}

// BenchmarkDrawGitOps draws a GitOps page of 1000 Kustomizations in ten
// chains, as hack/dashbench's cluster holds, without reading a cluster:
// what drawing alone costs.
func BenchmarkDrawGitOps(b *testing.B) {
	g := graph.Graph{}
	var views []KustomizationView
	for i := range 1000 {
		k := graph.Key{Namespace: fmt.Sprintf("ns-%02d", i%100), Name: fmt.Sprintf("ks-%04d", i)}
		g[k] = nil
		if i >= 100 {
			g[k] = []graph.Key{{Namespace: k.Namespace, Name: fmt.Sprintf("ks-%04d", i-100)}}
		}
		views = append(views, KustomizationView{Key: k.String(), State: "Ready", Message: "Applied revision: main@sha1:0123456789abcdef",
			Revision: "main@sha1:0123456789abcdef", LastApplied: time.Now(), Inventory: 12,
			Events: []EventView{{Type: "Normal", Reason: "ReconciliationSucceeded", Message: "Reconciliation finished", At: time.Now()}}})
	}
	waves, blocked := g.Waves()
	page := GitOps{Graph: drawGraph(g, waves, blocked, views), Kustomizations: views, At: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		if err := pages.ExecuteTemplate(io.Discard, "gitops-main", page); err != nil {
			b.Fatal(err)
		}
	}
}
