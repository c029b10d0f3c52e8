package agent

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/storage/agent/contract"
)

// addLiveness adds the node's Lease heartbeat and, when the agent holds
// replicated volumes and o.SelfFenceAfter is set, the watchdog that
// fences them all once the Lease goes unrenewed that long
// (docs/failover.md). The Lease publishes the self-fence time, so the
// controller knows when it may promote.
func (a *Agent) addLiveness(o Options) {
	beat := &lease.Heartbeat{Client: a.client, Namespace: o.Namespace, Node: o.Node, Period: o.LeasePeriod}
	if len(a.fencers) > 0 && o.SelfFenceAfter > 0 {
		fence := &lease.SelfFence{After: o.SelfFenceAfter, Fence: fenceAll(a.fencers)}
		beat.Renewed, beat.SelfFenceAfter = fence.Renewed, o.SelfFenceAfter
		a.parts = append(a.parts, fence)
	}
	a.parts = append(a.parts, beat)
}

// fenceAll fences every backend's replicated volumes, each whatever the
// others do.
func fenceAll(fencers []contract.Fencer) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, f := range fencers {
			fenced, err := f.FencePairs(ctx)
			log.FromContext(ctx).Info("fenced the replicated volumes", "volumes", fenced)
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
}
