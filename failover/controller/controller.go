// Package controller runs Failover objects: it watches the primary
// node's Lease, fences the node when the Lease goes stale, promotes the
// backup claim from its newest complete replica, and moves the workload
// onto it. Each step is recorded in status before the next, so a
// restarted controller carries on where it was.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/internal/fluxevents"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/storage/agent/mover"
)

// Annotations a person sets on a Failover.
const (
	// AnnotationFenced confirms, for fencing Manual, that the named node
	// is off or cut off.
	AnnotationFenced = "failover.strata.dev/fenced"
	// AnnotationAcceptDataAge lets a failover serve a replica older than
	// the policy's maxDataAge.
	AnnotationAcceptDataAge = "failover.strata.dev/accept-data-age"
)

// DefaultSelfFenceAfter is strata controller's --self-fence-after: the
// agents' default --self-fence-after (6 s), their check interval (a
// tenth of that) and room for the fence itself and clock skew.
const DefaultSelfFenceAfter = 10 * time.Second

// Reconciler runs Failovers.
type Reconciler struct {
	client.Client
	// APIReader reads each Failover fresh from the API server: a phase
	// acts on agents and workloads, and a cached copy a step behind
	// would repeat or undo a step.
	APIReader client.Reader
	Agents    mover.Agents
	// LeaseNamespace holds the agents' node Leases.
	LeaseNamespace string
	// SelfFenceAfter is how long an agent goes without renewing its
	// Lease before it has fenced its node's replicated volumes: the safe
	// time an AgentSelfFence promotion waits for, counted from the last
	// renewal.
	SelfFenceAfter time.Duration
	Events         events.EventRecorder
	Now            func() time.Time
	// started is when this controller began watching: a Lease's age is
	// counted from then at most, as kube-controller-manager counts a
	// node's from what it saw itself. After a whole cluster was down,
	// every Lease is old, and no node may be taken for lost before its
	// agent had unreachableAfter to renew.
	started time.Time
}

// agentCheckTimeout bounds the primary's agent's answer while the
// Failover watches the primary.
const agentCheckTimeout = 2 * time.Second

// recheckInvalid is how long a refused Failover waits before it is
// checked again.
const recheckInvalid = 10 * time.Second

// SetupWithManager watches Failovers, and the Deployments and
// StatefulSets they move: a workload ready on its new claim ends a
// failover's last step without waiting for a poll. A Failover's own
// status writes wake nothing: a step that fails and writes why must
// retry with backoff, not at once in a loop; every wait polls.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.started = r.Now()
	if err := r.checkAgentsFenceInTime(context.Background()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).For(&failoverv1alpha1.Failover{}, replication.SpecChanged).
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.failoversOf("Deployment"))).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.failoversOf("StatefulSet"))).
		Complete(r)
}

// checkAgentsFenceInTime refuses to start a controller whose
// --self-fence-after is shorter than an agent needs to have surely
// fenced, as the agents' Leases publish it: an AgentSelfFence failover
// would then start the backup while the primary may still write. A
// Failover checks its own node's Lease again before it promotes.
func (r *Reconciler) checkAgentsFenceInTime(ctx context.Context) error {
	leases := &coordinationv1.LeaseList{}
	if err := r.APIReader.List(ctx, leases, client.InNamespace(r.LeaseNamespace)); err != nil {
		return fmt.Errorf("reading the agents' Leases in %s: %w", r.LeaseNamespace, err)
	}
	for i := range leases.Items {
		l := &leases.Items[i]
		if after, ok := lease.SelfFenceAfter(l); ok && lease.FencedBy(after) > r.SelfFenceAfter {
			return fmt.Errorf("--self-fence-after %s is too short: the agent of Lease %s/%s fences %s after its last renewal, surely only %s after it; set the controller's to at least %s, or lower the agents'",
				r.SelfFenceAfter, l.Namespace, l.Name, after, lease.FencedBy(after), lease.FencedBy(after))
		}
	}
	return nil
}

// failoversOf maps a workload of kind to the Failovers that name it.
func (r *Reconciler) failoversOf(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &failoverv1alpha1.FailoverList{}
		if err := r.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, fo := range list.Items {
			if fo.Spec.Workload.Kind == kind && fo.Spec.Workload.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fo)})
			}
		}
		return reqs
	}
}

// Reconcile moves a Failover one phase on, as far as it can go now.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fo := &failoverv1alpha1.Failover{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, fo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := fo.DeepCopy()
	if fo.Status.Active == "" {
		fo.Status.Active, fo.Status.Phase = failoverv1alpha1.ActivePrimary, failoverv1alpha1.PhaseProtected
	}
	fo.Status.ObservedGeneration = fo.Generation
	result, err := r.step(ctx, fo)
	var bad *invalid
	switch {
	case errors.As(err, &bad):
		status.MarkFailed(fo, "InvalidFailover", bad.msg, true)
		r.Events.Eventf(fo, nil, corev1.EventTypeWarning, "InvalidFailover", "Check", "%s", bad.msg)
		// Checked again in a while: what it names may still be on its
		// way (a claim binding, a Deployment applied in the same commit).
		result, err = ctrl.Result{RequeueAfter: recheckInvalid}, nil
	case err != nil:
		status.MarkFailed(fo, "FailoverError", err.Error(), false)
	}
	if perr := status.Patch(ctx, r.Client, before, fo); perr != nil {
		return ctrl.Result{}, perr
	}
	return result, err
}

// step checks the app, then runs the phase it is in.
func (r *Reconciler) step(ctx context.Context, fo *failoverv1alpha1.Failover) (ctrl.Result, error) {
	a, err := r.check(ctx, fo)
	if err != nil {
		return ctrl.Result{}, err
	}
	var result ctrl.Result
	switch fo.Status.Phase {
	case failoverv1alpha1.PhaseProtected:
		result, err = r.watchPrimary(ctx, fo, a)
	case failoverv1alpha1.PhaseUnreachable, failoverv1alpha1.PhaseFencing:
		result, err = r.fence(ctx, fo, a)
	case failoverv1alpha1.PhasePromoting, failoverv1alpha1.PhaseWaiting:
		return r.promote(ctx, fo, a)
	case failoverv1alpha1.PhaseFailedOver:
		return r.failedOver(ctx, fo, a)
	case failoverv1alpha1.PhaseResyncing:
		return r.resync(ctx, fo, a)
	case failoverv1alpha1.PhaseFailingBack:
		p, err := r.pairSides(ctx, fo, a)
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.switchBack(ctx, fo, a, p)
	default:
		return ctrl.Result{}, refuse("phase %q is not one strata knows", fo.Status.Phase)
	}
	if err == nil && fo.Status.Phase == failoverv1alpha1.PhasePromoting {
		// Fenced just now: promote at once, not a reconcile later.
		return r.promote(ctx, fo, a)
	}
	return result, err
}

// leaseAge is how long ago the node's agent last renewed its Lease, or
// this controller started, whichever was later: the age that takes a node
// for lost, never before its agent had time to renew under this
// controller.
func (r *Reconciler) leaseAge(ctx context.Context, node string) (time.Duration, error) {
	l, err := r.nodeLease(ctx, node)
	if err != nil {
		return 0, err
	}
	return min(lease.Age(l, r.Now()), r.Now().Sub(r.started)), nil
}

// renewedWithin says whether the node's agent renewed its Lease within
// limit: the test that takes a node for back. Unlike leaseAge it owes
// nothing to when this controller started: a controller restarted while a
// node is lost must not take the node for back.
func (r *Reconciler) renewedWithin(ctx context.Context, node string, limit time.Duration) (bool, error) {
	l, err := r.nodeLease(ctx, node)
	if err != nil {
		return false, err
	}
	return lease.Age(l, r.Now()) < limit, nil
}

// renewedSinceItsFence says whether the node's agent has renewed its
// Lease since it would have fenced itself: its Lease is younger than the
// self-fence time it publishes. Only then is a fence found on its volume
// one from an outage that is over, which may be lifted; a fence the agent
// set in an outage still going on must hold, whatever this controller's
// phase.
func (r *Reconciler) renewedSinceItsFence(ctx context.Context, node string) (bool, error) {
	l, err := r.nodeLease(ctx, node)
	if err != nil {
		return false, err
	}
	after, fences := lease.SelfFenceAfter(l)
	return fences && lease.Age(l, r.Now()) < after, nil
}

// nodeLease reads the agent's Lease of a node.
func (r *Reconciler) nodeLease(ctx context.Context, node string) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := r.Get(ctx, client.ObjectKey{Namespace: r.LeaseNamespace, Name: lease.Name(node)}, l)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("node %s has no Lease %s/%s: is strata's agent running there?", node, r.LeaseNamespace, lease.Name(node))
	}
	return l, err
}

// watchPrimary keeps the app where it is while the primary node's agent
// renews its Lease, and starts a failover once it has not for
// unreachableAfter.
func (r *Reconciler) watchPrimary(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) (ctrl.Result, error) {
	read := r.Now()
	age, err := r.leaseAge(ctx, fo.Spec.Primary.Node)
	if err != nil {
		return ctrl.Result{}, err
	}
	limit := policy(fo).UnreachableAfter.Duration
	if age < limit {
		msg := fmt.Sprintf("running on the primary %s; its agent renewed its Lease %s ago", fo.Spec.Primary.Node, age.Round(time.Millisecond))
		// An agent that cannot be reached may be going down with its
		// node: that must not put off the check of its Lease, neither by
		// a call that hangs on a cut-off network nor by an error's
		// backoff. A healthy agent answers in milliseconds.
		check, cancel := context.WithTimeout(ctx, agentCheckTimeout)
		defer cancel()
		if err := r.unfenceIfFenced(check, fo, a); err != nil {
			msg += fmt.Sprintf("; checking whether its volume is fenced failed: %v", err)
		}
		status.MarkReady(fo, "Protected", msg)
		r.checkDataAge(fo, a)
		// Back when the Lease turns stale, however long the check took.
		return ctrl.Result{RequeueAfter: max(limit-age-r.Now().Sub(read), time.Millisecond)}, nil
	}
	now := metav1.NewMicroTime(r.Now())
	fo.Status.Phase, fo.Status.Timestamps = failoverv1alpha1.PhaseUnreachable, failoverv1alpha1.PhaseTimestamps{Detected: &now}
	msg := fmt.Sprintf("node %s's agent has not renewed its Lease for %s (limit %s)", fo.Spec.Primary.Node, age.Round(time.Millisecond), limit)
	status.MarkReconciling(fo, msg)
	fluxevents.Eventf(r.Events, map[string]string{"node": fo.Spec.Primary.Node, "leaseAge": age.Round(time.Millisecond).String()},
		fo, corev1.EventTypeWarning, ReasonFailoverStarted, "Detect", "%s: failing %s %s over to node %s (detected %s)",
		msg, fo.Spec.Workload.Kind, fo.Spec.Workload.Name, fo.Spec.Backup.Node, detectedAt(fo))
	return r.fence(ctx, fo, a)
}

func policy(fo *failoverv1alpha1.Failover) failoverv1alpha1.Policy {
	return fo.Spec.Policy.WithDefaults()
}
