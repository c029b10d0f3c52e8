package kustomization

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/reconciler/apply"
	"github.com/strata-gitops/strata/reconciler/guard"
	"github.com/strata-gitops/strata/reconciler/skipapply"
)

// engine is the apply machinery for one reconcile: Flux's server-side
// apply manager, talking through the data-loss guard and the skip-apply
// layer, as the Kustomization's service account when it names one.
type engine struct {
	manager *ssa.ResourceManager
	client  *guard.Client
	skip    *skipapply.Client
	// target reads the cluster the objects are on, as the controller: the
	// guard's and prune's reads of live objects.
	target  client.Client
	cluster *target
}

func (r *Reconciler) engine(ctx context.Context, obj *kustomizev1.Kustomization) (*engine, error) {
	cluster, err := r.targetOf(ctx, obj)
	if err != nil {
		return nil, err
	}
	targetClient := r.Direct
	if cluster.server != "" {
		remote, err := r.remote.get(cluster.key, cluster.config, r.Direct.Scheme())
		if err != nil {
			return nil, fmt.Errorf("the cluster at %s (spec.kubeConfig): %w", cluster.server, err)
		}
		if err := cluster.reachable(remote.discovery); err != nil {
			return nil, err
		}
		targetClient = remote.client
	}
	c, err := r.clientFor(obj, cluster, targetClient)
	if err != nil {
		return nil, err
	}
	skip := skipapply.NewClient(c)
	guarded := guard.NewClient(skip, obj)
	poller := polling.NewStatusPoller(guarded, guarded.RESTMapper(), polling.Options{})
	manager := apply.NewResourceManager(guarded, poller)
	manager.SetConcurrency(4)
	return &engine{manager: manager, client: guarded, skip: skip, target: targetClient, cluster: cluster}, nil
}

// clientFor impersonates spec.serviceAccountName, or the controller's
// default service account, as Flux does for multi-tenancy, on the target
// cluster; with neither the controller's own identity there is used.
func (r *Reconciler) clientFor(obj *kustomizev1.Kustomization, cluster *target, direct client.Client) (client.Client, error) {
	sa := r.serviceAccountOf(obj)
	if sa == "" {
		return direct, nil
	}
	cfg := rest.CopyConfig(cluster.config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", obj.Namespace, sa),
	}
	c, err := client.New(cfg, client.Options{Scheme: direct.Scheme(), Mapper: direct.RESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("impersonating service account '%s': %w", sa, err)
	}
	return c, nil
}
