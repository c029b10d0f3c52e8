package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/rules"
)

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
