package charts

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The dashboard listens on the controller's loopback under auth none, so
// only a port-forward reaches it, and on every address under kubernetes,
// behind its Service; off, neither the flag nor the Service is rendered;
// any other auth is refused at render.
func TestTheDashboardListensWhereItsAuthAllows(t *testing.T) {
	for _, c := range []struct {
		set        []string
		bind, auth string
	}{
		{nil, "127.0.0.1:9080", "none"},
		{[]string{"dashboard.auth=kubernetes", "dashboard.port=9999"}, ":9999", "kubernetes"},
		{[]string{"dashboard.enabled=false"}, "", ""},
	} {
		objects := testenv.RenderChart(t, "strata", "strata-system", append(append([]string{}, required...), c.set...)...)
		args := containerArgs(t, find(t, objects, "Deployment", "strata-controller"), "controller")
		if got := flag(args, "--dashboard-bind-address"); got != c.bind {
			t.Errorf("with %v the dashboard binds %q, want %q", c.set, got, c.bind)
		}
		if got := flag(args, "--dashboard-auth"); got != c.auth {
			t.Errorf("with %v the dashboard's auth is %q, want %q", c.set, got, c.auth)
		}
		services := 0
		for _, o := range objects {
			if o.GetKind() == "Service" && o.GetName() == "strata-dashboard" {
				services++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[c.bind != ""]; services != want {
			t.Errorf("with %v the chart renders %d dashboard Services, want %d", c.set, services, want)
		}
	}
	out, err := testenv.Helm(t, append([]string{"template", "strata", filepath.Join(testenv.RepoRoot(), "charts", "strata")},
		setFlags(append(append([]string{}, required...), "dashboard.auth=open"))...)...)
	if err == nil || !strings.Contains(err.Error()+string(out), `dashboard.auth "open"`) {
		t.Errorf("dashboard.auth=open rendered, or without naming the value: %v %s", err, out)
	}
}
