package manager

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-gitops/strata/dashboard"
)

// Dashboard is where the read-only dashboard is served ("" or "0":
// nowhere) and how callers are authenticated: "kubernetes" (bearer
// tokens, TokenReview and SubjectAccessReview) or "none" (behind kubectl
// port-forward).
type Dashboard struct {
	Addr, Auth string
}

// on says the dashboard is served.
func (d Dashboard) on() bool { return d.Addr != "" && d.Addr != "0" }

func (d Dashboard) authorizer(cfg *rest.Config, mgr manager.Manager) (dashboard.Authorizer, error) {
	switch d.Auth {
	case "none":
		return dashboard.Open{}, nil
	case "kubernetes", "":
		c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		return &dashboard.Kubernetes{Client: c}, err
	}
	return nil, fmt.Errorf("--dashboard-auth %q: use kubernetes (bearer tokens, reviewed by the API server) or none (reached only through kubectl port-forward)", d.Auth)
}

// registerDashboard serves the dashboard from the manager's caches, its
// open pages told of every change the caches see.
func registerDashboard(mgr manager.Manager, cfg *rest.Config, o Options) error {
	d := o.Dashboard
	if !d.on() {
		return nil
	}
	auth, err := d.authorizer(cfg, mgr)
	if err != nil {
		return err
	}
	live := dashboard.NewBroker()
	srv := &dashboard.Server{Reader: mgr.GetCache(), Auth: auth, Live: live, LeaseNamespace: o.LeaseNamespace, GitOps: o.Engine,
		Log: mgr.GetLogger().WithName("dashboard")}
	watch := manager.RunnableFunc(func(ctx context.Context) error {
		if err := dashboard.Watch(ctx, mgr.GetCache(), live, o.Engine, o.LeaseNamespace); err != nil {
			return err
		}
		return srv.Start(ctx)
	})
	if err := mgr.Add(watch); err != nil {
		return err
	}
	return mgr.Add(httpServer(d.Addr, srv.Handler()))
}
