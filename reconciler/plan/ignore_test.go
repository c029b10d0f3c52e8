package plan_test

import (
	"strings"
	"testing"
)

// TestPlanSeesWhatTheArtifactHolds: files a source artifact leaves out
// (.sourceignore, Flux's default exclusions) are not rendered, as the
// engine never sees them; the files it holds are.
func TestPlanSeesWhatTheArtifactHolds(t *testing.T) {
	r := newRepo(t, fixture())
	r.branch("ignored", map[string]string{
		"apps/.sourceignore":   "drafts/\n",
		"apps/drafts/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: draft\n  namespace: databases\n",
		"apps/.github/ci.yaml": "on: push\njobs: {}\n",
		"apps/kept/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: databases\n",
	})
	p := run(t, r, "ignored", false)
	if len(p.Errors) > 0 {
		t.Fatalf("errors: %v", p.Errors)
	}
	got := changesOf(p)
	if want := "apps created ConfigMap/databases/kept"; !strings.Contains(got, want) || strings.Contains(got, "draft") {
		t.Errorf("changes:\n%s\nwant %q and nothing of apps/drafts", got, want)
	}
}
