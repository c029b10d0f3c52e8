package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/rules"
)

// FieldManager is the field manager of the workload switch.
const FieldManager = "strata-failover"

// promote makes the backup claim's volume the newest complete replica and
// moves the workload onto it. A replica older than maxDataAge waits for a
// person, as does a destination that holds none.
func (r *Reconciler) promote(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) (ctrl.Result, error) {
	dest, ok := replication.DestinationOf(a.destination)
	if !ok {
		return r.waitForPerson(fo, fmt.Sprintf("ReplicationDestination %s is not set up (see its Synchronizing condition): the backup has nothing to serve", a.destination.Name))
	}
	agent, _, err := replication.ClaimVolume(ctx, r.Client, r.Agents, "", fo.Namespace, fo.Spec.Backup.Claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The backup's agent, not the destination's status, says which
	// replica it holds: the status is refreshed in its own time.
	pair := dest.Pair
	held, err := agent.GetPair(ctx, pair)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("pair %s on the backup's agent %s: %w", pair, agent.Address(), err)
	}
	if held.Latest == 0 || held.LatestAt == nil {
		return r.waitForPerson(fo, fmt.Sprintf("ReplicationDestination %s holds no complete replica: the backup has nothing to serve", a.destination.Name))
	}
	age := r.Now().Sub(*held.LatestAt)
	if limit := policy(fo).MaxDataAge.Duration; age > limit && fo.Annotations[AnnotationAcceptDataAge] != "true" {
		return r.waitForPerson(fo, fmt.Sprintf("the newest replica is %s old, more than maxDataAge %s: annotate %s=true to fail over to it anyway",
			age.Round(time.Second), limit, AnnotationAcceptDataAge))
	}
	fo.Status.Phase = failoverv1alpha1.PhasePromoting
	if _, err := agent.Promote(ctx, pair); err != nil {
		return ctrl.Result{}, fmt.Errorf("promoting pair %s on agent %s: %w", pair, agent.Address(), err)
	}
	now := metav1.NewMicroTime(r.Now())
	fo.Status.Timestamps.Promoted = &now
	fo.Status.DataAgeAtPromotion = &metav1.Duration{Duration: age.Round(time.Millisecond)}
	fo.Status.Active, fo.Status.Phase = failoverv1alpha1.ActiveBackup, failoverv1alpha1.PhaseFailedOver
	r.Events.Eventf(fo, nil, corev1.EventTypeWarning, "Promoted", "Promote", "claim %s on node %s serves replica %d of %s (%s old)",
		fo.Spec.Backup.Claim, fo.Spec.Backup.Node, held.Latest, held.LatestAt.UTC().Format(time.RFC3339), fo.Status.DataAgeAtPromotion.Duration)
	return r.runOnBackup(ctx, fo, a)
}

func (r *Reconciler) waitForPerson(fo *failoverv1alpha1.Failover, msg string) (ctrl.Result, error) {
	if fo.Status.Phase != failoverv1alpha1.PhaseWaiting {
		r.Events.Eventf(fo, nil, corev1.EventTypeWarning, "WaitingForPerson", "Promote", "%s", msg)
	}
	fo.Status.Phase = failoverv1alpha1.PhaseWaiting
	status.MarkFailed(fo, "WaitingForPerson", msg, false)
	return ctrl.Result{RequeueAfter: time.Minute}, nil
}

// runOnBackup points the workload at the backup claim, and reports the
// failover done once the workload is ready there.
func (r *Reconciler) runOnBackup(ctx context.Context, fo *failoverv1alpha1.Failover, a *app) (ctrl.Result, error) {
	if err := r.useClaim(ctx, a, fo.Spec.Primary.Claim, fo.Spec.Backup.Claim); err != nil {
		return ctrl.Result{}, err
	}
	ready, err := r.readyOn(ctx, a, fo.Spec.Backup.Claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ready {
		status.MarkReconciling(fo, fmt.Sprintf("%s %s is starting on the backup claim %s", fo.Spec.Workload.Kind, fo.Spec.Workload.Name, fo.Spec.Backup.Claim))
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if fo.Status.Timestamps.Started == nil {
		now := metav1.NewMicroTime(r.Now())
		fo.Status.Timestamps.Started = &now
		r.completed(fo)
	}
	status.MarkReady(fo, "FailedOver", fmt.Sprintf("running on the backup %s since %s, from a replica %s old; %s",
		fo.Spec.Backup.Node, fo.Status.Timestamps.Started.UTC().Format(time.RFC3339), fo.Status.DataAgeAtPromotion.Duration, fo.Status.FencedBy))
	// The primary's Lease is polled for a failback: nothing else says
	// it is back.
	return ctrl.Result{RequeueAfter: failbackPoll}, nil
}

// useClaim points the workload's pod template at claim to instead of
// from. The Kustomization engine applies the same switch to the
// manifest from Git while the Failover is active on its backup
// (docs/failover.md), so the next reconcile does not revert it.
func (r *Reconciler) useClaim(ctx context.Context, a *app, from, to string) error {
	changed := false
	for i := range a.template.Spec.Volumes {
		if pvc := a.template.Spec.Volumes[i].PersistentVolumeClaim; pvc != nil && pvc.ClaimName == from {
			pvc.ClaimName, changed = to, true
		}
	}
	if !changed {
		return nil
	}
	return r.Update(ctx, a.workload, client.FieldOwner(FieldManager))
}

// readyOn says whether as many of the workload's pods as it wants are
// ready on claim, none of them terminating. The workload's own status
// would count the lost node's old pods, which read Ready until the node
// controller marks them, 40 s and more after the loss.
func (r *Reconciler) readyOn(ctx context.Context, a *app, claim string) (bool, error) {
	var selector *metav1.LabelSelector
	want := int32(1)
	switch w := a.workload.(type) {
	case *appsv1.Deployment:
		selector, want = w.Spec.Selector, ptr.Deref(w.Spec.Replicas, 1)
	case *appsv1.StatefulSet:
		selector, want = w.Spec.Selector, ptr.Deref(w.Spec.Replicas, 1)
	}
	matching, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false, refuse("%s %s's selector: %v", a.workload.GetObjectKind().GroupVersionKind().Kind, a.workload.GetName(), err)
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(a.workload.GetNamespace()), client.MatchingLabelsSelector{Selector: matching}); err != nil {
		return false, err
	}
	var ready int32
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && podutils.IsPodReady(p) && slices.Contains(rules.ClaimsOf(&corev1.PodTemplateSpec{Spec: p.Spec}), claim) {
			ready++
		}
	}
	return ready >= want, nil
}
