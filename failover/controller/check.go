package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/rules"
)

// app is what a Failover names, read and checked.
type app struct {
	workload    client.Object
	template    *corev1.PodTemplateSpec
	destination *volsyncv1alpha1.ReplicationDestination
}

// invalid is a Failover whose spec or surroundings a person must fix:
// nothing is changed until they do.
type invalid struct{ msg string }

func (e *invalid) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &invalid{fmt.Sprintf(format, args...)} }

// check reads the app and refuses what cannot fail over safely: a claim
// that is missing or on another node than its side says, a backup
// smaller than the primary, a workload that does not use the active
// claim, or a pair that is not strata's between these two claims.
func (r *Reconciler) check(ctx context.Context, fo *failoverv1alpha1.Failover) (*app, error) {
	primary, err := r.side(ctx, fo.Namespace, fo.Spec.Primary, "primary")
	if err != nil {
		return nil, err
	}
	backup, err := r.side(ctx, fo.Namespace, fo.Spec.Backup, "backup")
	if err != nil {
		return nil, err
	}
	if err := rules.FailoverSizes(fo, primary, backup); err != nil {
		return nil, refuse("%v", err)
	}
	a := &app{}
	if a.workload, a.template, err = r.workload(ctx, fo); err != nil {
		return nil, err
	}
	// The switch to the backup is written after the promotion is
	// recorded, so either claim may be the one in use.
	if err := rules.FailoverWorkload(fo, a.template); err != nil {
		return nil, refuse("%v", err)
	}
	if a.destination, err = r.pair(ctx, fo); err != nil {
		return nil, err
	}
	return a, nil
}

// side reads a side's claim and its volume, and checks the volume is on
// the side's node.
func (r *Reconciler) side(ctx context.Context, ns string, s failoverv1alpha1.Side, name string) (*corev1.PersistentVolume, error) {
	pv, err := replication.BoundVolume(ctx, r.Client, ns, s.Claim)
	if err != nil {
		return nil, refuse("%s %v", name, err)
	}
	if !rules.OnNode(pv, s.Node) {
		return nil, refuse("volume %s of %s claim %s/%s is not pinned to node %s by its node affinity", pv.Name, name, ns, s.Claim, s.Node)
	}
	return pv, nil
}

// workload reads the Deployment or StatefulSet and its pod template.
func (r *Reconciler) workload(ctx context.Context, fo *failoverv1alpha1.Failover) (client.Object, *corev1.PodTemplateSpec, error) {
	key := client.ObjectKey{Namespace: fo.Namespace, Name: fo.Spec.Workload.Name}
	switch fo.Spec.Workload.Kind {
	case "Deployment":
		d := &appsv1.Deployment{}
		if err := r.Get(ctx, key, d); err != nil {
			return nil, nil, refuse("Deployment %s: %v", key, err)
		}
		return d, &d.Spec.Template, nil
	case "StatefulSet":
		s := &appsv1.StatefulSet{}
		if err := r.Get(ctx, key, s); err != nil {
			return nil, nil, refuse("StatefulSet %s: %v", key, err)
		}
		return s, &s.Spec.Template, nil
	}
	return nil, nil, refuse("workload kind %q: use Deployment or StatefulSet", fo.Spec.Workload.Kind)
}

// pair checks the VolSync pair: a strata.dev/btrfs source of the primary
// claim whose destination is for the backup claim.
func (r *Reconciler) pair(ctx context.Context, fo *failoverv1alpha1.Failover) (*volsyncv1alpha1.ReplicationDestination, error) {
	rs := &volsyncv1alpha1.ReplicationSource{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: fo.Namespace, Name: fo.Spec.Replication.Source}, rs); err != nil {
		return nil, refuse("ReplicationSource %s/%s: %v", fo.Namespace, fo.Spec.Replication.Source, err)
	}
	rd := &volsyncv1alpha1.ReplicationDestination{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: fo.Namespace, Name: fo.Spec.Replication.Destination}, rd); err != nil {
		return nil, refuse("ReplicationDestination %s/%s: %v", fo.Namespace, fo.Spec.Replication.Destination, err)
	}
	if err := rules.FailoverReplication(fo, rs, rd); err != nil {
		return nil, refuse("%v", err)
	}
	return rd, nil
}
