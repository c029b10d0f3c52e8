package up

import (
	"context"
	"time"

	"k8s.io/client-go/rest"

	"github.com/strata-gitops/strata/internal/local/podforward"
)

// Dashboard is where the chart's controller serves its dashboard: on its
// pod's loopback (dashboard.auth none), port dashboard.port.
var Dashboard = podforward.Target{Namespace: namespace, Selector: "app.kubernetes.io/name=strata,app.kubernetes.io/component=controller", Port: 9080}

// forwardDashboard forwards 127.0.0.1:o.DashboardPort to the controller's
// dashboard, as `kubectl port-forward` does, until ctx ends, and returns
// its URL.
func forwardDashboard(ctx context.Context, cfg *rest.Config, o Options) (string, error) {
	addr, err := podforward.Forward(ctx, cfg, Dashboard, o.DashboardPort, 2*time.Minute, o.Out)
	if err != nil {
		return "", err
	}
	return "http://" + addr + "/", nil
}
