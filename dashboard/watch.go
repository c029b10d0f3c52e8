package dashboard

import (
	"context"
	"slices"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bbv1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
)

// shown are the kinds the pages show: a change to any is told to the
// open pages.
var shown = []client.Object{&corev1.Node{}, &coordinationv1.Lease{}, &corev1.PersistentVolumeClaim{}, &corev1.Pod{},
	&storagev1alpha1.LVMCluster{}, &failoverv1alpha1.Failover{}, &volsyncv1alpha1.ReplicationSource{}, &volsyncv1alpha1.ReplicationDestination{},
	&bbv1.BuildbarnStorage{}, &bbv1.BuildbarnScheduler{}, &bbv1.BuildbarnFrontend{}, &bbv1.BuildbarnWorker{}, &bbv1.BuildbarnBrowser{}}

// gitOps are the engine's kinds, watched only with the engine.
var gitOps = []client.Object{&kustomizev1.Kustomization{}, &sourcev1.GitRepository{}, &corev1.Event{}}

// Watch tells the broker of every change to what the pages show, from
// the informers of c (the controller's cache, which the pages read);
// with engine, the Kustomizations' and GitRepositories' too.
// Leases are the exception: every kubelet renews one in kube-node-lease
// every ten seconds, which the pages do not show, so only the agents'
// Leases, in leaseNamespace, count.
func Watch(ctx context.Context, c cache.Cache, live *Broker, engine bool, leaseNamespace string) error {
	changed := toolscache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			l, isLease := obj.(*coordinationv1.Lease)
			return !isLease || l.Namespace == leaseNamespace
		},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { live.Changed() },
			UpdateFunc: func(any, any) { live.Changed() },
			DeleteFunc: func(any) { live.Changed() },
		},
	}
	kinds := shown
	if engine {
		kinds = append(slices.Clone(shown), gitOps...)
	}
	live.fed.Store(true)
	for _, obj := range kinds {
		// Not waiting for each to sync: the pages read them as they
		// come, and a change before the sync is told all the same.
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if meta.IsNoMatchError(err) {
			continue // a kind this cluster does not serve, as Buildbarn's where it is off
		}
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(changed); err != nil {
			return err
		}
	}
	return nil
}
