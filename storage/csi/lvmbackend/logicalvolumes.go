package lvmbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/fluxcd/pkg/apis/meta"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// lookup returns the LogicalVolume of a volume or snapshot ID, or
// codes.NotFound.
func (b *Controller) lookup(ctx context.Context, id, kind string) (*storagev1alpha1.LogicalVolume, error) {
	parsed, err := backend.ParseVolumeID(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	lv := &storagev1alpha1.LogicalVolume{}
	err = b.Cache.Get(ctx, client.ObjectKey{Name: parsed.Name}, lv)
	if apierrors.IsNotFound(err) { // or not yet in the cache
		err = b.Client.Get(ctx, client.ObjectKey{Name: parsed.Name}, lv)
	}
	if err != nil {
		return nil, apiError(err, parsed.Name)
	}
	if lv.Labels[KindLabel] != kind {
		return nil, status.Errorf(codes.NotFound, "%s is not a %s of %s", id, kind, storagev1alpha1.CSIDriver)
	}
	return lv, nil
}

// waitReady waits until the agent reports the volume at its size, in a
// version no older than the one given (the cache may lag behind a write).
func (b *Controller) waitReady(ctx context.Context, written *storagev1alpha1.LogicalVolume) (*storagev1alpha1.LogicalVolume, error) {
	name := written.Name
	return b.waitFor(ctx, name, func(lv *storagev1alpha1.LogicalVolume) (bool, error) {
		switch {
		case lv == nil || lv.Generation < written.Generation: // not in the cache yet
			return false, nil
		case !lv.DeletionTimestamp.IsZero():
			return false, status.Errorf(codes.Aborted, "LogicalVolume %s is being deleted", name)
		}
		return readiness(lv)
	})
}

// waitCreated is waitReady for a new volume. One its node had no room for
// is given up, so that a retry can place it elsewhere; only a volume the
// agent never made (no device, no size reported) is.
func (b *Controller) waitCreated(ctx context.Context, written *storagev1alpha1.LogicalVolume) (*storagev1alpha1.LogicalVolume, error) {
	lv, err := b.waitReady(ctx, written)
	if status.Code(err) == codes.ResourceExhausted && lv != nil && lv.Status.Device == "" && lv.Status.CurrentSize == nil {
		_ = b.Client.Delete(ctx, lv, client.Preconditions{UID: &lv.UID})
	}
	return lv, err
}

// readiness reads a LogicalVolume's state as the agent last reported it.
func readiness(lv *storagev1alpha1.LogicalVolume) (bool, error) {
	if lv.Status.ObservedGeneration != lv.Generation {
		return false, nil
	}
	for _, cond := range lv.Status.Conditions {
		if cond.Type != meta.ReadyCondition {
			continue
		}
		if cond.Status == metav1.ConditionTrue {
			return lv.Status.CurrentSize != nil && lv.Status.CurrentSize.Cmp(lv.Spec.Size) >= 0, nil
		}
		if cond.Reason == noSpaceReason {
			return false, status.Errorf(codes.ResourceExhausted, "node %s: %s", lv.Spec.NodeName, cond.Message)
		}
	}
	return false, nil
}

// noSpaceReason is the agent's reason for a volume its group has no room for.
const noSpaceReason = "NoSpace"

// waitFor follows one LogicalVolume in the cache until done says so,
// done fails, or the wait runs out. done sees nil when the cache has no
// such object.
func (b *Controller) waitFor(ctx context.Context, name string, done func(*storagev1alpha1.LogicalVolume) (bool, error)) (*storagev1alpha1.LogicalVolume, error) {
	ctx, cancel := context.WithTimeout(ctx, b.Wait)
	defer cancel()
	var last *storagev1alpha1.LogicalVolume
	for {
		changed := b.changes.next(name) // before the read, so no change is missed
		lv := &storagev1alpha1.LogicalVolume{}
		if err := b.Cache.Get(ctx, client.ObjectKey{Name: name}, lv); apierrors.IsNotFound(err) {
			lv = nil
		} else if err != nil {
			return last, apiError(err, name)
		}
		if finished, err := done(lv); finished || err != nil {
			return lv, err
		}
		if lv != nil {
			last = lv
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return last, notReady(name, last)
		}
	}
}

// notReady says what the agent last reported about a volume it has not
// finished with in time.
func notReady(name string, last *storagev1alpha1.LogicalVolume) error {
	if last == nil {
		return status.Errorf(codes.DeadlineExceeded, "LogicalVolume %s: no report from its agent in time", name)
	}
	msg := "no report yet"
	for _, cond := range last.Status.Conditions {
		if cond.Type == meta.ReadyCondition {
			msg = cond.Message
		}
	}
	return status.Errorf(codes.DeadlineExceeded, "LogicalVolume %s: the agent of node %s has not finished in time (last report: %s); is it running?",
		name, last.Spec.NodeName, msg)
}

// apiError maps an API server error to a gRPC status.
func apiError(err error, name string) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	switch {
	case apierrors.IsNotFound(err):
		return status.Errorf(codes.NotFound, "LogicalVolume %s not found", name)
	case apierrors.IsInvalid(err):
		return status.Errorf(codes.InvalidArgument, "LogicalVolume %s: %v", name, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.Errorf(codes.DeadlineExceeded, "LogicalVolume %s: %v", name, err)
	}
	return status.Errorf(codes.Unavailable, "LogicalVolume %s: %v", name, fmt.Errorf("API server: %w", err))
}

// notifier wakes the calls waiting on a LogicalVolume when it changes.
type notifier struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

func newNotifier() *notifier { return &notifier{waiting: map[string]chan struct{}{}} }

// next returns a channel closed at the next change of the named object.
func (n *notifier) next(name string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.waiting[name]
	if !ok {
		ch = make(chan struct{})
		n.waiting[name] = ch
	}
	return ch
}

func (n *notifier) changed(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch, ok := n.waiting[name]; ok {
		close(ch)
		delete(n.waiting, name)
	}
}
