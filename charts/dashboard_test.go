package charts

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// The claims' used bytes are read with tokens of an account that may get
// nodes/stats and nothing else, which the controller's flag names; with
// volumeUsage off, neither the account nor the flag is rendered.
func TestTheVolumeUsageAccountMayReadNodesStatsOnly(t *testing.T) {
	objects := testenv.RenderChart(t, "strata", "strata-system", required...)
	args := containerArgs(t, find(t, objects, "Deployment", "strata-controller"), "controller")
	if got := flag(args, "--volume-usage-account"); got != "strata-system/strata-volume-usage" {
		t.Errorf("--volume-usage-account is %q", got)
	}
	find(t, objects, "ServiceAccount", "strata-volume-usage")
	role := find(t, objects, "ClusterRole", "strata-volume-usage")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if len(rules) != 1 || fmt.Sprint(rules[0]) != "map[apiGroups:[] resources:[nodes/stats] verbs:[get]]" {
		t.Errorf("the volume usage account may do more than get nodes/stats: %v", rules)
	}
	binding := find(t, objects, "ClusterRoleBinding", "strata-volume-usage")
	if ref, _, _ := unstructured.NestedString(binding.Object, "roleRef", "name"); ref != "strata-volume-usage" {
		t.Errorf("the volume usage account is bound to %q", ref)
	}

	off := testenv.RenderChart(t, "strata", "strata-system", append(append([]string{}, required...), "dashboard.volumeUsage.enabled=false")...)
	if got := flag(containerArgs(t, find(t, off, "Deployment", "strata-controller"), "controller"), "--volume-usage-account"); got != "" {
		t.Errorf("with volumeUsage off the controller still reads usage as %q", got)
	}
	for _, o := range off {
		if strings.HasSuffix(o.GetName(), "-volume-usage") {
			t.Errorf("with volumeUsage off the chart renders %s %s", o.GetKind(), o.GetName())
		}
	}
}
