// Package whenused starts controllers once the cluster holds an object of
// the kinds they serve, and not before.
//
// A controller's watches list and follow every object of the kinds it
// watches, cluster-wide: a Failover controller watches every Deployment, a
// Buildbarn controller every ConfigMap. Where nobody uses the feature,
// those watches cost the API server and the process on every object the
// engine applies, for nothing. Waiting costs one watch per served kind.
package whenused

import (
	"context"
	"fmt"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
)

// Setup runs setup once an object of any of the kinds exists: at start if
// one does, else when the first is created. feature names what starts, for
// the log. Controllers set up on a running manager start at once.
func Setup(mgr ctrl.Manager, feature string, kinds []client.Object, setup func() error) error {
	return mgr.Add(ctrlmanager.RunnableFunc(func(ctx context.Context) error {
		used, err := watch(ctx, mgr.GetCache(), kinds)
		if ctx.Err() != nil {
			// Stopped while the kinds were listed: no failure to report.
			return nil
		}
		if err != nil {
			return fmt.Errorf("the %s controllers start with the first object of their kinds, but watching for one failed: %w; "+
				"check that the cluster serves the kind (strata's chart installs its CRDs) and that strata may list and watch it", feature, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-used:
		}
		log.FromContext(ctx).Info("the cluster uses " + feature + ": starting its controllers")
		return setup()
	}))
}

// watch returns a channel closed once an object of the kinds is seen.
func watch(ctx context.Context, informers cache.Informers, kinds []client.Object) (<-chan struct{}, error) {
	used := make(chan struct{})
	var once sync.Once
	seen := toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { once.Do(func() { close(used) }) }}
	for _, k := range kinds {
		informer, err := informers.GetInformer(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("%T: %w", k, err)
		}
		if _, err := informer.AddEventHandler(seen); err != nil {
			return nil, fmt.Errorf("%T: %w", k, err)
		}
	}
	return used, nil
}
