package kustomization

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/engine/apply"
	"github.com/strata-gitops/strata/engine/guard"
	"github.com/strata-gitops/strata/engine/skipapply"
)

// engine is the apply machinery for one reconcile: Flux's server-side
// apply manager, talking through the data-loss guard and the skip-apply
// layer, as the Kustomization's service account when it names one.
type engine struct {
	manager *ssa.ResourceManager
	client  *guard.Client
	skip    *skipapply.Client
}

func (r *Reconciler) engine(obj *kustomizev1.Kustomization) (*engine, error) {
	c, err := r.clientFor(obj)
	if err != nil {
		return nil, err
	}
	skip := skipapply.NewClient(c)
	guarded := guard.NewClient(skip, obj)
	poller := polling.NewStatusPoller(guarded, guarded.RESTMapper(), polling.Options{})
	manager := apply.NewResourceManager(guarded, poller)
	manager.SetConcurrency(4)
	return &engine{manager: manager, client: guarded, skip: skip}, nil
}

// clientFor impersonates spec.serviceAccountName, or the controller's
// default service account, as Flux does for multi-tenancy; with neither
// the controller's own identity is used.
func (r *Reconciler) clientFor(obj *kustomizev1.Kustomization) (client.Client, error) {
	sa := r.serviceAccountOf(obj)
	if sa == "" {
		return r.Direct, nil
	}
	cfg := rest.CopyConfig(r.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", obj.Namespace, sa),
	}
	c, err := client.New(cfg, client.Options{Scheme: r.Direct.Scheme(), Mapper: r.Direct.RESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("impersonating service account '%s': %w", sa, err)
	}
	return c, nil
}
