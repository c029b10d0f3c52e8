// Package lease is a node's liveness as strata's failover sees it. Each
// node's agent renews the Lease strata-node-{node} every period; the
// failover controller reads how long ago that was. It does not wait for
// the Node to turn NotReady, which takes the kubelet's 40 s grace and
// more, and it learns that the agent itself, which fences, is alive.
package lease

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Name is the Lease of a node.
func Name(node string) string { return "strata-node-" + node }

// Heartbeat renews a node's Lease until its context ends. It is a
// controller-runtime Runnable, so the agent's manager runs it.
type Heartbeat struct {
	// Client writes the Lease; it is never read, so the agent needs no
	// right to list Leases.
	Client    client.Client
	Namespace string
	Node      string
	// Period is how often the Lease is renewed.
	Period time.Duration
	// SelfFenceAfter, when set, is published on the Lease
	// (AnnotationSelfFenceAfter): the agent fences itself that long
	// after a renewal's RenewTime. The failover controller promotes
	// under AgentSelfFence only when its own wait covers it.
	SelfFenceAfter time.Duration
	// Renewed, when set, is told each renewal's outcome and the
	// RenewTime it wrote: the agent's self-fencing counts from that
	// time, as the controller does, not from when the call returned.
	Renewed func(renewTime time.Time, ok bool)
}

// AnnotationSelfFenceAfter is the Lease annotation saying how long after
// its RenewTime the node's agent fences itself; absent, it does not.
const AnnotationSelfFenceAfter = "strata.dev/self-fence-after"

// FenceAllowance is what fencing itself may take, on top of an agent's
// SelfFenceAfter and its check interval: setting a few subvolumes
// read-only and killing their writers, and the clock skew between nodes.
const FenceAllowance = 500 * time.Millisecond

// FencedBy is when an agent that publishes after has surely fenced, counted
// from the Lease's RenewTime: after, then at most one check interval
// (a tenth of after), then the fence itself.
func FencedBy(after time.Duration) time.Duration {
	return after + after/10 + FenceAllowance
}

// SelfFenceAfter reads what the Lease's agent publishes: how long after
// RenewTime it fences itself, and whether it fences at all.
func SelfFenceAfter(l *coordinationv1.Lease) (time.Duration, bool) {
	d, err := time.ParseDuration(l.Annotations[AnnotationSelfFenceAfter])
	return d, err == nil && d > 0
}

// Start renews the Lease every period until ctx ends.
func (h *Heartbeat) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("lease").WithValues("node", h.Node)
	tick := time.NewTicker(h.Period)
	defer tick.Stop()
	for {
		stamp, err := h.renew(ctx)
		if err != nil {
			logger.Error(err, "renewing the node's Lease")
		}
		if h.Renewed != nil {
			h.Renewed(stamp, err == nil)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// NeedLeaderElection is false: every agent beats for its own node.
func (h *Heartbeat) NeedLeaderElection() bool { return false }

// renew is one API call: a merge patch of the renewal time, which needs
// no read first and does not conflict with the node's other agent
// renewing the same Lease. Only a Lease not there yet is created.
func (h *Heartbeat) renew(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, h.Period)
	defer cancel()
	// MicroTime keeps microseconds: the stamp the agent counts from is
	// the one the API server stores.
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: Name(h.Node)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(h.Node), LeaseDurationSeconds: ptr.To(max(1, int32(3*h.Period/time.Second))),
			RenewTime: &now}}
	// The annotation is always written, null when the agent does not
	// fence, so that a flag changed at a restart is never left stale.
	var published any
	if h.SelfFenceAfter > 0 {
		published = h.SelfFenceAfter.String()
		l.Annotations = map[string]string{AnnotationSelfFenceAfter: h.SelfFenceAfter.String()}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationSelfFenceAfter: published}},
		"spec": l.Spec})
	if err != nil {
		return now.Time, err
	}
	err = h.Client.Patch(ctx, l.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		l.Spec.AcquireTime = &now
		err = h.Client.Create(ctx, l)
	}
	return now.Time, err
}

// Age is how long ago the Lease was last renewed, by the reader's clock.
// A Lease never renewed is as old as it can be.
func Age(l *coordinationv1.Lease, now time.Time) time.Duration {
	if l.Spec.RenewTime == nil {
		return time.Duration(1<<63 - 1)
	}
	return now.Sub(l.Spec.RenewTime.Time)
}

// SelfFence fences the node when its agent has gone After without
// renewing its Lease: by then the failover controller may be about to
// promote the backup, and this node must have stopped writing. Its clock
// runs on its own, so a renewal that hangs on a cut-off network does not
// hold the fence up. It never unfences: only the controller knows whether
// the backup was promoted meanwhile.
type SelfFence struct {
	After time.Duration
	// Fence stops the node's writes to replicated volumes.
	Fence func(ctx context.Context) error

	mu      sync.Mutex
	last    time.Time
	fenced  bool
	started time.Time
}

// Renewed records a renewal's outcome and its RenewTime, which the
// fence counts from; Heartbeat.Renewed takes it.
func (f *SelfFence) Renewed(renewTime time.Time, ok bool) {
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if renewTime.After(f.last) {
		f.last = renewTime
	}
	f.fenced = false
}

// Start checks every tenth of After until ctx ends.
func (f *SelfFence) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("self-fence")
	f.mu.Lock()
	f.started = time.Now()
	f.mu.Unlock()
	tick := time.NewTicker(f.After / 10)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if !f.due() {
			continue
		}
		logger.Info("the node's Lease has not been renewed for too long: fencing its replicated volumes", "after", f.After)
		if err := f.Fence(ctx); err != nil {
			logger.Error(err, "fencing")
			continue // tried again at the next tick
		}
		f.mu.Lock()
		f.fenced = true
		f.mu.Unlock()
	}
}

// due says whether the node should fence now: After has passed since the
// last renewal, or since start when there was none.
func (f *SelfFence) due() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	since := f.last
	if since.IsZero() {
		since = f.started
	}
	return !f.fenced && time.Since(since) >= f.After
}

// NeedLeaderElection is false: every agent fences its own node.
func (f *SelfFence) NeedLeaderElection() bool { return false }
