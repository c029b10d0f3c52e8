package manager

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/strata-gitops/strata/reconciler/guardwebhook"
)

// GuardWebhook is where the data-loss guard for Flux's prunes is served,
// in storage-only mode: a port (0 serves none), the directory of its
// tls.crt and tls.key, the users whose deletes it checks (Flux's
// kustomize-controller's, the garbage collector's), and Flux's
// --default-service-account.
type GuardWebhook struct {
	Port                  int
	CertDir               string
	Users                 []string
	GarbageCollectors     []string
	DefaultServiceAccount string
}

// register serves the guard on the manager's webhook server.
func (g GuardWebhook) register(mgr manager.Manager) error {
	if g.Port == 0 {
		return nil
	}
	srv := webhook.NewServer(webhook.Options{Port: g.Port, CertDir: g.CertDir})
	srv.Register(guardwebhook.Path, &admission.Webhook{Handler: &guardwebhook.Handler{Reader: mgr.GetAPIReader(), Users: g.Users,
		GarbageCollectors: g.GarbageCollectors, DefaultServiceAccount: g.DefaultServiceAccount}})
	return mgr.Add(srv)
}
