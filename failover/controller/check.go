package controller

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/failover/replication"
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
	if backup.Spec.Capacity.Storage().Cmp(*primary.Spec.Capacity.Storage()) < 0 {
		return nil, refuse("backup claim %s (%s) is smaller than primary claim %s (%s): a promoted replica would not fit",
			fo.Spec.Backup.Claim, backup.Spec.Capacity.Storage(), fo.Spec.Primary.Claim, primary.Spec.Capacity.Storage())
	}
	a := &app{}
	if a.workload, a.template, err = r.workload(ctx, fo); err != nil {
		return nil, err
	}
	// The switch to the backup is written after the promotion is
	// recorded, so either claim may be the one in use.
	if claims := claimsOf(a.template); !slices.Contains(claims, fo.Spec.Primary.Claim) && !slices.Contains(claims, fo.Spec.Backup.Claim) {
		return nil, refuse("%s %s uses neither the primary claim %s nor the backup claim %s: name the workload whose data this is",
			fo.Spec.Workload.Kind, fo.Spec.Workload.Name, fo.Spec.Primary.Claim, fo.Spec.Backup.Claim)
	}
	if a.destination, err = r.pair(ctx, fo); err != nil {
		return nil, err
	}
	return a, nil
}

// side reads a side's claim and its volume, and checks the volume is on
// the side's node.
func (r *Reconciler) side(ctx context.Context, ns string, s failoverv1alpha1.Side, name string) (*corev1.PersistentVolume, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Claim}, pvc); err != nil {
		return nil, refuse("%s claim %s/%s: %v", name, ns, s.Claim, err)
	}
	if pvc.Spec.VolumeName == "" {
		return nil, refuse("%s claim %s/%s is not bound to a volume yet", name, ns, s.Claim)
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return nil, refuse("volume %s of %s claim %s/%s: %v", pvc.Spec.VolumeName, name, ns, s.Claim, err)
	}
	if !onNode(pv, s.Node) {
		return nil, refuse("volume %s of %s claim %s/%s is not pinned to node %s by its node affinity", pv.Name, name, ns, s.Claim, s.Node)
	}
	return pv, nil
}

// onNode says whether the volume's node affinity allows only node.
func onNode(pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && slices.Equal(e.Values, []string{node}) {
				return true
			}
		}
	}
	return false
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

func claimsOf(t *corev1.PodTemplateSpec) []string {
	var claims []string
	for _, v := range t.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return claims
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
	switch {
	case rs.Spec.External == nil || rs.Spec.External.Provider != volsyncv1alpha1.ProviderBtrfs ||
		rd.Spec.External == nil || rd.Spec.External.Provider != volsyncv1alpha1.ProviderBtrfs:
		return nil, refuse("the pair %s → %s is not strata's: both need spec.external.provider %s", rs.Name, rd.Name, volsyncv1alpha1.ProviderBtrfs)
	case rs.Spec.SourcePVC != fo.Spec.Primary.Claim:
		return nil, refuse("ReplicationSource %s replicates claim %s, not the primary claim %s", rs.Name, rs.Spec.SourcePVC, fo.Spec.Primary.Claim)
	case rs.Spec.External.Parameters[replication.ParamDestination] != rd.Name:
		return nil, refuse("ReplicationSource %s sends to %q, not to ReplicationDestination %s", rs.Name, rs.Spec.External.Parameters[replication.ParamDestination], rd.Name)
	case rd.Spec.External.Parameters[replication.ParamDestinationPVC] != fo.Spec.Backup.Claim:
		return nil, refuse("ReplicationDestination %s is for claim %q, not the backup claim %s", rd.Name, rd.Spec.External.Parameters[replication.ParamDestinationPVC], fo.Spec.Backup.Claim)
	}
	return rd, nil
}
