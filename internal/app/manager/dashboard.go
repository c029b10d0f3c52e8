package manager

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-gitops/strata/dashboard"
	"github.com/strata-gitops/strata/storage/volumeusage"
)

// Dashboard is where the read-only dashboard is served ("" or "0":
// nowhere) and how callers are authenticated: "kubernetes" (bearer
// tokens, TokenReview and SubjectAccessReview) or "none" (behind kubectl
// port-forward).
type Dashboard struct {
	Addr, Auth string
	// UsageAccount ("namespace/name", "" none) may read nodes' stats:
	// the claims' used bytes are read from the kubelets with its tokens,
	// every UsageInterval, verifying the kubelets' certificates against
	// the cluster's CA with VerifyKubelets.
	UsageAccount   string
	UsageInterval  time.Duration
	VerifyKubelets bool
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
	if err := d.readUsage(mgr, cfg, srv); err != nil {
		return err
	}
	return mgr.Add(httpServer(d.Addr, srv.Handler()))
}

// readUsage keeps the claims' used bytes for srv, read from the kubelets.
func (d Dashboard) readUsage(mgr manager.Manager, cfg *rest.Config, srv *dashboard.Server) error {
	if d.UsageAccount == "" {
		return nil
	}
	ns, name, ok := strings.Cut(d.UsageAccount, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--volume-usage-account %q: give NAMESPACE/NAME of a service account that may get nodes/stats", d.UsageAccount)
	}
	var roots *x509.CertPool
	if d.VerifyKubelets {
		ca := cfg.CAData
		if len(ca) == 0 && cfg.CAFile != "" {
			var err error
			if ca, err = os.ReadFile(cfg.CAFile); err != nil {
				return fmt.Errorf("--volume-usage-verify-kubelets: reading the cluster's CA: %w", err)
			}
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return errors.New("--volume-usage-verify-kubelets: the controller's kubeconfig holds no CA certificate to verify the kubelets with")
		}
	}
	tokens := &volumeusage.ServiceAccountTokens{Client: mgr.GetClient(), Namespace: ns, Name: name}
	usage := &volumeusage.Reader{Cache: mgr.GetCache(), Summary: volumeusage.NewKubelets(roots, tokens.Token).Summary,
		Interval: d.UsageInterval, Changed: srv.Live.Changed, Log: mgr.GetLogger().WithName("volume-usage")}
	srv.Usage = usage
	return mgr.Add(manager.RunnableFunc(usage.Start))
}
