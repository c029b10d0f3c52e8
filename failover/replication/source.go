package replication

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// SourceReconciler syncs each strata.dev/btrfs ReplicationSource on its
// trigger: a cron schedule, a new spec.trigger.manual, or, with neither,
// continuously.
type SourceReconciler struct {
	client.Client
	Agents mover.Agents
	// Continuous is the pause between syncs of a source with no trigger:
	// an unchanged volume's sync costs a snapshot and a few hundred bytes.
	Continuous time.Duration
	// SyncTimeout bounds one sync; a larger volume's first one needs more.
	SyncTimeout time.Duration
	Now         func() time.Time
}

// SetupWithManager watches ReplicationSources.
func (r *SourceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A Failover that changes sides stops or resumes its source's syncs.
	sourceOfFailover := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		fo := o.(*failoverv1alpha1.Failover)
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: fo.Namespace, Name: fo.Spec.Replication.Source}}}
	})
	// Its own status writes wake nothing: a failed sync is retried with
	// backoff, not at once in a loop (see SpecChanged).
	return ctrl.NewControllerManagedBy(mgr).Named("replicationsource").
		For(&volsyncv1alpha1.ReplicationSource{}, SpecChanged).
		Watches(&failoverv1alpha1.Failover{}, sourceOfFailover).
		Watches(&volsyncv1alpha1.ReplicationDestination{}, handler.EnqueueRequestsFromMapFunc(r.sourcesOf),
			builder.WithPredicates(destinationPublished)).
		Complete(r)
}

// destinationPublished passes a ReplicationDestination whose published
// agent, tenant, pair or token Secret changed, set up for the first time
// included: a source that found it not set up yet syncs once it is, not
// at its next backoff.
var destinationPublished = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, _ := DestinationOf(e.ObjectOld.(*volsyncv1alpha1.ReplicationDestination))
		after, ok := DestinationOf(e.ObjectNew.(*volsyncv1alpha1.ReplicationDestination))
		return ok && after != before
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// sourcesOf maps a ReplicationDestination to the sources that send to it.
func (r *SourceReconciler) sourcesOf(ctx context.Context, o client.Object) []reconcile.Request {
	list := &volsyncv1alpha1.ReplicationSourceList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, rs := range list.Items {
		if rs.Spec.External != nil && rs.Spec.External.Parameters[rules.ParamDestination] == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rs)})
		}
	}
	return reqs
}

// Reconcile runs a sync when the trigger says so.
func (r *SourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rs := &volsyncv1alpha1.ReplicationSource{}
	if err := r.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rs.Spec.External == nil || !volsyncv1alpha1.IsStrata(rs.Spec.External.Provider) {
		return ctrl.Result{}, nil
	}
	before := rs.DeepCopy()
	if rs.Status == nil {
		rs.Status = &volsyncv1alpha1.ReplicationSourceStatus{}
	}
	due, wait, err := r.due(rs)
	var result ctrl.Result
	failedOver, ferr := r.failedOverBy(ctx, rs)
	switch {
	case ferr != nil:
		err = ferr
	case failedOver != "":
		status.Set(rs, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonManual,
			fmt.Sprintf("stopped: Failover %s runs the app on the backup; the source claim's copy is stale until failback", failedOver))
	case err != nil:
		status.Set(rs, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonError, err.Error())
		err = nil // a bad schedule waits for a new spec, not a retry
	case rs.Spec.Paused:
		status.Set(rs, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonManual, "paused: spec.paused is true")
	case !due:
		result.RequeueAfter = wait
	default:
		err = r.sync(ctx, rs)
		if err == nil {
			_, result.RequeueAfter, _ = r.due(rs)
		}
	}
	if perr := status.Patch(ctx, r.Client, before, rs); perr != nil {
		return ctrl.Result{}, perr
	}
	return result, err
}

// due says whether a sync is due now and, if not, how long until it is;
// it sets nextSyncTime and the waiting condition.
func (r *SourceReconciler) due(rs *volsyncv1alpha1.ReplicationSource) (bool, time.Duration, error) {
	now := r.Now()
	trigger := rs.Spec.Trigger
	switch {
	case trigger != nil && trigger.Manual != "":
		rs.Status.NextSyncTime = nil
		if trigger.Manual != rs.Status.LastManualSync {
			return true, 0, nil
		}
		status.Set(rs, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonManual,
			"waiting for spec.trigger.manual to change")
		return false, 0, nil
	case trigger != nil && trigger.Schedule != nil:
		schedule, err := cron.ParseStandard(*trigger.Schedule)
		if err != nil {
			return false, 0, fmt.Errorf("spec.trigger.schedule %q: %w", *trigger.Schedule, err)
		}
		from := rs.CreationTimestamp.Time
		if rs.Status.LastSyncStartTime != nil {
			from = rs.Status.LastSyncStartTime.Time
		}
		next := schedule.Next(from)
		if !next.After(now) {
			return true, 0, nil
		}
		rs.Status.NextSyncTime = &metav1.Time{Time: next}
		status.Set(rs, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonSched,
			"waiting for the next scheduled sync")
		return false, next.Sub(now), nil
	}
	// Continuous: the next sync starts a pause after the last one.
	if last := rs.Status.LastSyncTime; last != nil && now.Sub(last.Time) < r.Continuous {
		next := last.Add(r.Continuous)
		rs.Status.NextSyncTime = &metav1.Time{Time: next}
		return false, next.Sub(now), nil
	}
	return true, 0, nil
}

// sync has the source claim's agent send its next replica to the
// destination's agent, and records the outcome as VolSync does.
func (r *SourceReconciler) sync(ctx context.Context, rs *volsyncv1alpha1.ReplicationSource) error {
	started := r.Now()
	rs.Status.LastSyncStartTime = &metav1.Time{Time: started}
	replica, dest, err := r.send(ctx, rs)
	if err != nil {
		rs.Status.LatestMoverStatus = &volsyncv1alpha1.MoverStatus{Result: volsyncv1alpha1.MoverResultFailed, Logs: err.Error()}
		status.Set(rs, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonError, err.Error())
		return err
	}
	finished := r.Now()
	rs.Status.LastSyncTime = &metav1.Time{Time: finished}
	rs.Status.LastSyncDuration = &metav1.Duration{Duration: finished.Sub(started).Round(time.Millisecond)}
	if rs.Spec.Trigger != nil && rs.Spec.Trigger.Manual != "" {
		rs.Status.LastManualSync = rs.Spec.Trigger.Manual
	}
	from := "whole"
	if replica.Parent != 0 {
		from = fmt.Sprintf("changes since replica %d", replica.Parent)
	}
	rs.Status.LatestMoverStatus = &volsyncv1alpha1.MoverStatus{Result: volsyncv1alpha1.MoverResultSuccessful,
		Logs: fmt.Sprintf("replica %d (%s): %d stream bytes in %s", replica.Seq, from, replica.StreamBytes, replica.Duration)}
	rs.Status.External = map[string]string{externalLatest: strconv.FormatUint(replica.Seq, 10),
		"streamBytes": strconv.FormatInt(replica.StreamBytes, 10), "destinationAgent": dest.Agent}
	status.Set(rs, volsyncv1alpha1.ConditionSynchronizing, metav1.ConditionFalse, volsyncv1alpha1.SynchronizingReasonSched,
		fmt.Sprintf("replica %d sent", replica.Seq))
	return nil
}

// send finds both sides and runs one sync between their agents.
func (r *SourceReconciler) send(ctx context.Context, rs *volsyncv1alpha1.ReplicationSource) (wire.Replica, Destination, error) {
	name := rs.Spec.External.Parameters[rules.ParamDestination]
	if name == "" {
		return wire.Replica{}, Destination{}, fmt.Errorf("spec.external.parameters.%s is empty: name the ReplicationDestination in %s", rules.ParamDestination, rs.Namespace)
	}
	rd := &volsyncv1alpha1.ReplicationDestination{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: name}, rd); err != nil {
		return wire.Replica{}, Destination{}, fmt.Errorf("ReplicationDestination %s/%s: %w", rs.Namespace, name, err)
	}
	if rd.Spec.External == nil || rd.Spec.External.Provider != rs.Spec.External.Provider {
		return wire.Replica{}, Destination{}, fmt.Errorf("ReplicationDestination %s/%s is not a %s one, as the source is", rs.Namespace, name, rs.Spec.External.Provider)
	}
	dest, ok := DestinationOf(rd)
	if !ok {
		return wire.Replica{}, dest, fmt.Errorf("ReplicationDestination %s/%s is not set up yet: see its Synchronizing condition", rs.Namespace, name)
	}
	token, err := dest.Token(ctx, r.Client, rs.Namespace)
	if err != nil {
		return wire.Replica{}, dest, err
	}
	agent, volume, err := ClaimVolume(ctx, r.Client, r.Agents, rs.Spec.External.Provider, rs.Namespace, rs.Spec.SourcePVC)
	if err != nil {
		return wire.Replica{}, dest, err
	}
	if agent.Address() == dest.Agent {
		return wire.Replica{}, dest, fmt.Errorf("claim %s and the destination's claim are on the same agent %s: a pair on one node survives no node loss; put the destination claim on another node", rs.Spec.SourcePVC, agent.Address())
	}
	if _, err := agent.SetPair(ctx, dest.Pair, wire.PairRequest{Volume: volume, Token: token}); err != nil {
		return wire.Replica{}, dest, fmt.Errorf("setting up pair %s on agent %s: %w", dest.Pair, agent.Address(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.SyncTimeout)
	defer cancel()
	replica, err := agent.Sync(ctx, dest.Pair, wire.SyncRequest{Peer: dest.Agent, PeerTenant: dest.Tenant, Token: token})
	if err != nil {
		return wire.Replica{}, dest, fmt.Errorf("sync of pair %s from %s to %s: %w", dest.Pair, agent.Address(), dest.Agent, err)
	}
	return replica, dest, nil
}

// failedOverBy names the Failover, if any, that runs this source's app
// on its backup: the source claim's node was lost and fenced, and its
// copy must not be sent over the replicas the backup was promoted from.
func (r *SourceReconciler) failedOverBy(ctx context.Context, rs *volsyncv1alpha1.ReplicationSource) (string, error) {
	list := &failoverv1alpha1.FailoverList{}
	if err := r.List(ctx, list, client.InNamespace(rs.Namespace)); err != nil {
		return "", err
	}
	for _, fo := range list.Items {
		if fo.Spec.Replication.Source == rs.Name && fo.Status.Active == failoverv1alpha1.ActiveBackup {
			return fo.Name, nil
		}
	}
	return "", nil
}
