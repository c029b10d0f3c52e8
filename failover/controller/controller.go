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
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/strata-gitops/strata/rules"
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
		fo, corev1.EventTypeWarning, ReasonFailoverStarted, "Detect", "%s: failing %s %s over to node %s",
		msg, fo.Spec.Workload.Kind, fo.Spec.Workload.Name, fo.Spec.Backup.Node)
	return r.fence(ctx, fo, a)
}

// fence keeps the lost node from writing, by the policy's mode, before
// anything is promoted. A primary whose agent renews its Lease again
// before it is fenced is back: the failover is called off.
func (r *Reconciler) fence(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) (ctrl.Result, error) {
	node := fo.Spec.Primary.Node
	back, err := r.renewedWithin(ctx, node, policy(fo).UnreachableAfter.Duration)
	if err != nil {
		return ctrl.Result{}, err
	}
	if back {
		fo.Status.Phase, fo.Status.Timestamps = failoverv1alpha1.PhaseProtected, failoverv1alpha1.PhaseTimestamps{}
		r.Events.Eventf(fo, nil, corev1.EventTypeNormal, "NodeBack", "Detect", "node %s's agent renews its Lease again: no failover", node)
		return r.watchPrimary(ctx, fo, a)
	}
	fo.Status.Phase = failoverv1alpha1.PhaseFencing
	mode := policy(fo).Fencing
	switch mode {
	case failoverv1alpha1.FencingManual:
		if fo.Annotations[AnnotationFenced] != node {
			status.MarkReconciling(fo, fmt.Sprintf("waiting for a person to confirm node %s is off: annotate %s=%s", node, AnnotationFenced, node))
			// Polled, not only woken by the annotation: a node whose
			// agent renews its Lease again calls the failover off.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
	case failoverv1alpha1.FencingOutOfServiceTaint:
		if err := r.taint(ctx, node); err != nil {
			return ctrl.Result{}, err
		}
		// The taint has the node's pods deleted; the backup starts only
		// once none is left on the claim.
		if waiting, err := r.podsStillOn(ctx, fo, fo.Spec.Primary.Claim); err != nil || waiting != "" {
			return r.stillFencing(fo, waiting, err)
		}
	default: // AgentSelfFence
		age, err := r.leaseAge(ctx, node)
		if err != nil {
			return ctrl.Result{}, err
		}
		if result, wait, err := r.agentFenced(ctx, fo, age); err != nil || wait {
			return result, err
		}
	}
	now := metav1.NewMicroTime(r.Now())
	fo.Status.Timestamps.Fenced = &now
	fo.Status.FencedBy = fmt.Sprintf("%s fenced node %s", mode, node)
	fo.Status.Phase = failoverv1alpha1.PhasePromoting
	r.Events.Eventf(fo, nil, corev1.EventTypeWarning, "Fenced", "Fence", "%s", fo.Status.FencedBy)
	return ctrl.Result{}, nil
}

// agentFenced says whether the primary's agent has surely fenced
// itself, or how long to wait. It trusts the agent only when its Lease
// says it fences (strata.dev/self-fence-after) within this controller's
// wait; and it trusts the agent's silence only when the node's kubelet
// is silent too. A kubelet that still renews its node's Lease means the
// node lives while its agent does not (killed, out of memory, an upgrade
// pulling its image): nothing fenced there, and the app may be writing
// on it, so no backup starts until the kubelet is silent too or a
// person confirms the node is off.
func (r *Reconciler) agentFenced(ctx context.Context, fo *failoverv1alpha1.Failover, age time.Duration) (ctrl.Result, bool, error) {
	node := fo.Spec.Primary.Node
	if fo.Annotations[AnnotationFenced] == node {
		return ctrl.Result{}, false, nil // a person confirmed the node is off
	}
	l, err := r.nodeLease(ctx, node)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	after, fences := lease.SelfFenceAfter(l)
	var why string
	switch {
	case !fences:
		why = fmt.Sprintf("node %s's agent does not fence itself (its Lease publishes no %s: --self-fence-after 0, or an agent older than the controller); confirm the node is off: annotate %s=%s",
			node, lease.AnnotationSelfFenceAfter, AnnotationFenced, node)
	case lease.FencedBy(after) > r.SelfFenceAfter:
		why = fmt.Sprintf("node %s's agent fences %s after its last renewal, surely fenced only %s after it (a tenth more for its check, %s for the fence), more than this controller's --self-fence-after %s: raise the controller's to at least %s, or confirm the node is off: annotate %s=%s",
			node, after, lease.FencedBy(after), lease.FenceAllowance, r.SelfFenceAfter, lease.FencedBy(after), AnnotationFenced, node)
	}
	if why != "" {
		result, err := r.stillFencing(fo, why, nil)
		return result, true, err
	}
	if wait := r.SelfFenceAfter - age; wait > 0 {
		status.MarkReconciling(fo, fmt.Sprintf("waiting %s more for node %s's agent to have fenced itself (it does %s after its last renewal)",
			wait.Round(time.Millisecond), node, r.SelfFenceAfter))
		return ctrl.Result{RequeueAfter: wait}, true, nil
	}
	alive, err := r.kubeletAlive(ctx, node, policy(fo).UnreachableAfter.Duration)
	if err != nil || !alive {
		return ctrl.Result{}, err != nil, err
	}
	if c := apimeta.FindStatusCondition(fo.Status.Conditions, meta.ReconcilingCondition); c == nil || !strings.Contains(c.Message, "its kubelet renews") {
		r.Events.Eventf(fo, nil, corev1.EventTypeWarning, ReasonNodeLeaseStale, "Fence", "node %s's agent has not renewed its Lease for %s while its kubelet renews the node's: no failover while the node lives; restart the agent, or once the node is off annotate %s=%s",
			node, age.Round(time.Millisecond), AnnotationFenced, node)
	}
	result, err := r.stillFencing(fo, fmt.Sprintf("node %s's agent has not renewed its Lease, but its kubelet renews the node's: the node lives, and the app may be writing there, so the backup does not start; restart the agent (it fences or is back), or once the node is off annotate %s=%s",
		node, AnnotationFenced, node), nil)
	return result, true, err
}

// stillFencing keeps the Failover fencing, saying why, and looks again
// in a second.
func (r *Reconciler) stillFencing(fo *failoverv1alpha1.Failover, why string, err error) (ctrl.Result, error) {
	if err != nil {
		return ctrl.Result{}, err
	}
	status.MarkReconciling(fo, why)
	return ctrl.Result{RequeueAfter: time.Second}, nil
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

// kubeletAlive says whether the node's kubelet renewed its own Lease
// (kube-node-lease/{node}) within limit, or within its renewal interval
// (a quarter of the Lease's duration, 10 s by default) and a fifth more
// when that is longer: a living kubelet's Lease is that old between
// renewals.
func (r *Reconciler) kubeletAlive(ctx context.Context, node string, limit time.Duration) (bool, error) {
	l := &coordinationv1.Lease{}
	// Read from the API server: the cache may be scoped to what strata
	// watches, and a kubelet taken for dead would let the backup start.
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}, l)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if l.Spec.LeaseDurationSeconds != nil {
		renewal := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second / 4
		limit = max(limit, renewal+renewal/5)
	}
	return lease.Age(l, r.Now()) < limit, nil
}

// podsStillOn says which of the Failover's namespace's pods still use
// claim, or "" when none does.
func (r *Reconciler) podsStillOn(ctx context.Context, fo *failoverv1alpha1.Failover, claim string) (string, error) {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(fo.Namespace)); err != nil {
		return "", err
	}
	var left []string
	for i := range pods.Items {
		if slices.Contains(rules.ClaimsOf(&corev1.PodTemplateSpec{Spec: pods.Items[i].Spec}), claim) {
			left = append(left, pods.Items[i].Name)
		}
	}
	if len(left) == 0 {
		return "", nil
	}
	return fmt.Sprintf("waiting for pods %s on claim %s to be gone: only then has their writing stopped", strings.Join(left, ", "), claim), nil
}

// unfenceIfFenced makes the primary's volume writable again when its
// agent fenced it during an outage that ended before any promotion: the
// agent never unfences by itself, as it cannot know that. It acts only
// once the agent has renewed its Lease since it would have fenced.
func (r *Reconciler) unfenceIfFenced(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) error {
	dest, ok := replication.DestinationOf(a.destination)
	if !ok {
		return nil // not set up yet: nothing was replicated, nothing fenced
	}
	if back, err := r.renewedSinceItsFence(ctx, fo.Spec.Primary.Node); err != nil || !back {
		return err
	}
	pair := dest.Pair
	agent, _, err := replication.ClaimVolume(ctx, r.Client, r.Agents, "", fo.Namespace, fo.Spec.Primary.Claim)
	if err != nil {
		return err
	}
	p, err := agent.GetPair(ctx, pair)
	if err != nil || !p.Fenced {
		return err
	}
	if _, err := agent.Unfence(ctx, pair); err != nil {
		return fmt.Errorf("unfencing pair %s on agent %s: %w", pair, agent.Address(), err)
	}
	r.Events.Eventf(fo, nil, corev1.EventTypeNormal, "Unfenced", "Unfence", "node %s came back before a failover: claim %s is writable again", fo.Spec.Primary.Node, fo.Spec.Primary.Claim)
	return nil
}

// outOfService is Kubernetes' taint for a node that is shut down: pods
// on it are deleted and their volumes detached without waiting for it.
var outOfService = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// untaint removes the out-of-service taint the failover set, once the
// node is back for the failback: the app's pods run there again.
func (r *Reconciler) untaint(ctx context.Context, node string) error {
	n := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.MatchTaint(&outOfService) })
	if len(kept) == len(n.Spec.Taints) {
		return nil
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Taints = kept
	return r.Patch(ctx, n, patch)
}

func (r *Reconciler) taint(ctx context.Context, node string) error {
	n := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	for _, t := range n.Spec.Taints {
		if t.MatchTaint(&outOfService) {
			return nil
		}
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Taints = append(n.Spec.Taints, outOfService)
	return r.Patch(ctx, n, patch)
}

func policy(fo *failoverv1alpha1.Failover) failoverv1alpha1.Policy {
	return fo.Spec.Policy.WithDefaults()
}
