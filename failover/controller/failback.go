package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// AnnotationFailback asks for a failback: `strata failover back NAME`
// sets it, and so may a person. With policy failback Automatic none is
// needed.
const AnnotationFailback = "failover.strata.dev/failback"

// wantsFailback says whether the Failover should move back now: asked
// for or automatic, and the primary node's agent renewing its Lease.
func (r *Reconciler) wantsFailback(ctx context.Context, fo *failoverv1alpha1.Failover) (bool, error) {
	if policy(fo).Failback != failoverv1alpha1.FailbackAutomatic && fo.Annotations[AnnotationFailback] != "true" {
		return false, nil
	}
	return r.renewedWithin(ctx, fo.Spec.Primary.Node, policy(fo).UnreachableAfter.Duration)
}

// failbackPoll is how often a failed-over Failover reads the primary's
// Lease, to fail back once it is fresh again.
const failbackPoll = 5 * time.Second

// failedOver keeps the app on the backup until a failback is wanted and
// the primary is back.
func (r *Reconciler) failedOver(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) (ctrl.Result, error) {
	result, err := r.runOnBackup(ctx, fo, a)
	if err != nil || fo.Status.Timestamps.Started == nil {
		return result, err
	}
	back, err := r.wantsFailback(ctx, fo)
	if err != nil || !back {
		return ctrl.Result{RequeueAfter: failbackPoll}, err
	}
	return r.resync(ctx, fo, a)
}

// pairSides are both agents of the pair, and what the sync back needs.
type pairSides struct {
	pair            string
	primary, backup mover.Agent
	token           string
	primaryTenant   string
}

func (r *Reconciler) pairSides(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) (*pairSides, error) {
	dest, ok := replication.DestinationOf(a.destination)
	if !ok {
		return nil, fmt.Errorf("ReplicationDestination %s is not set up: see its Synchronizing condition", a.destination.Name)
	}
	p := &pairSides{pair: dest.Pair}
	var err error
	if p.primary, _, err = replication.ClaimVolume(ctx, r.Client, r.Agents, "", fo.Namespace, fo.Spec.Primary.Claim); err != nil {
		return nil, err
	}
	if p.backup, _, err = replication.ClaimVolume(ctx, r.Client, r.Agents, "", fo.Namespace, fo.Spec.Backup.Claim); err != nil {
		return nil, err
	}
	if p.token, err = dest.Token(ctx, r.Client, fo.Namespace); err != nil {
		return nil, err
	}
	held, err := p.primary.GetPair(ctx, p.pair)
	if err != nil {
		return nil, fmt.Errorf("pair %s on the primary's agent %s: %w", p.pair, p.primary.Address(), err)
	}
	p.primaryTenant = held.Tenant
	return p, nil
}

// syncBack sends the backup's next replica to the primary: from the
// newest replica both hold, so only what changed while the app ran on
// the backup.
func (p *pairSides) syncBack(ctx context.Context) (wire.Replica, error) {
	r, err := p.backup.Sync(ctx, p.pair, wire.SyncRequest{Peer: p.primary.Address(), PeerTenant: p.primaryTenant, Token: p.token})
	if err != nil {
		return wire.Replica{}, fmt.Errorf("syncing pair %s back from %s to %s: %w", p.pair, p.backup.Address(), p.primary.Address(), err)
	}
	return r, nil
}

// resync demotes the old primary, whose copy is stale, and sends it what
// changed on the backup, with the app still running there.
func (r *Reconciler) resync(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) (ctrl.Result, error) {
	p, err := r.pairSides(ctx, fo, a)
	if err != nil {
		return ctrl.Result{}, err
	}
	if policy(fo).Fencing == failoverv1alpha1.FencingOutOfServiceTaint {
		// The node is back: the app runs there again once it may.
		if err := r.untaint(ctx, fo.Spec.Primary.Node); err != nil {
			return ctrl.Result{}, err
		}
	}
	if _, err := p.primary.Fence(ctx, p.pair); err != nil {
		return ctrl.Result{}, fmt.Errorf("demoting the old primary's copy on %s: %w", p.primary.Address(), err)
	}
	fo.Status.Phase = failoverv1alpha1.PhaseResyncing
	status.MarkReconciling(fo, fmt.Sprintf("node %s is back: its stale copy is fenced, and the changes made on %s are sent to it", fo.Spec.Primary.Node, fo.Spec.Backup.Node))
	replica, err := p.syncBack(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	fo.Status.FailbackStreamBytes = replica.StreamBytes
	fo.Status.Phase = failoverv1alpha1.PhaseFailingBack
	return r.switchBack(ctx, fo, a, p)
}

// switchBack is the planned switch: quiesce the app on the backup, send
// the last changes, promote them on the primary, and move the app back.
func (r *Reconciler) switchBack(ctx context.Context, fo *failoverv1alpha1.Failover, a *app, p *pairSides) (ctrl.Result, error) {
	if fo.Status.FailbackReplica == 0 { // not sent since the app was quiesced
		if _, err := p.backup.Fence(ctx, p.pair); err != nil {
			return ctrl.Result{}, fmt.Errorf("quiescing the app on the backup %s: %w", p.backup.Address(), err)
		}
		final, err := p.syncBack(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		fo.Status.FailbackStreamBytes += final.StreamBytes
		fo.Status.FailbackReplica = final.Seq
	}
	if fo.Status.Active != failoverv1alpha1.ActivePrimary { // promoted once: the app may be writing there already
		if _, err := p.primary.Promote(ctx, p.pair); err != nil {
			return ctrl.Result{}, fmt.Errorf("promoting the changes on the primary %s: %w", p.primary.Address(), err)
		}
		fo.Status.Active = failoverv1alpha1.ActivePrimary
	}
	if err := r.useClaim(ctx, a, fo.Spec.Backup.Claim, fo.Spec.Primary.Claim); err != nil {
		return ctrl.Result{}, err
	}
	// The backup is a destination again: its volume is replaced at the
	// next promotion, and no app uses it. It is made writable only once
	// the app's old pods on it are gone: a container of one restarting
	// on a writable volume would take writes no one replicates.
	if waiting, err := r.podsStillOn(ctx, fo, fo.Spec.Backup.Claim); err != nil || waiting != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		status.MarkReconciling(fo, "failing back: "+waiting)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if _, err := p.backup.Unfence(ctx, p.pair); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.clearAnswers(ctx, fo); err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.NewMicroTime(r.Now())
	fo.Status.Timestamps.FailedBack = &now
	fo.Status.Phase, fo.Status.FailbackReplica = failoverv1alpha1.PhaseProtected, 0
	r.Events.Eventf(fo, nil, corev1.EventTypeNormal, "FailedBack", "Failback", "%s %s runs on node %s again; %d stream bytes went back",
		fo.Spec.Workload.Kind, fo.Spec.Workload.Name, fo.Spec.Primary.Node, fo.Status.FailbackStreamBytes)
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// clearAnswers removes the annotations a person gave for this failover:
// each answers one failover, not the next.
func (r *Reconciler) clearAnswers(ctx context.Context, fo *failoverv1alpha1.Failover) error {
	meta := fo.DeepCopy() // the patch's answer must not overwrite fo's new status
	patch := client.MergeFrom(meta.DeepCopy())
	for _, k := range []string{AnnotationFailback, AnnotationFenced, AnnotationAcceptDataAge} {
		delete(meta.Annotations, k)
	}
	return r.Patch(ctx, meta, patch)
}
