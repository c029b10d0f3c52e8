package rules

// The checks of a Failover against what it names, shared by the Failover
// controller, which reads the live cluster, and strata plan, which reads
// a revision's objects before they are applied.

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// Parameters of strata's providers (strata.dev/btrfs, strata.dev/lvm),
// under spec.external.parameters.
const (
	// ParamDestinationPVC is, on a ReplicationDestination, the claim the
	// replicas are for: a promotion fills it from the newest one.
	ParamDestinationPVC = "destinationPVC"
	// ParamDestination is, on a ReplicationSource, the name of its
	// ReplicationDestination in the same namespace.
	ParamDestination = "destination"
)

// OnNode says whether the volume's node affinity pins it to node: by the
// node's hostname label, as a static PV does, or by strata's topology
// key, as a node-local class's volume does (HostNodeParameter).
func OnNode(pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == corev1.LabelHostname || e.Key == backend.TopologyKey) && e.Operator == corev1.NodeSelectorOpIn && slices.Equal(e.Values, []string{node}) {
				return true
			}
		}
	}
	return false
}

// ClaimsOf lists the claims a pod template mounts.
func ClaimsOf(t *corev1.PodTemplateSpec) []string {
	var claims []string
	for _, v := range t.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return claims
}

// FailoverWorkload checks that the workload mounts the primary or the backup
// claim: after a failover it mounts the backup.
func FailoverWorkload(fo *failoverv1alpha1.Failover, t *corev1.PodTemplateSpec) error {
	if claims := ClaimsOf(t); !slices.Contains(claims, fo.Spec.Primary.Claim) && !slices.Contains(claims, fo.Spec.Backup.Claim) {
		return fmt.Errorf("%s %s uses neither the primary claim %s nor the backup claim %s: name the workload whose data this is",
			fo.Spec.Workload.Kind, fo.Spec.Workload.Name, fo.Spec.Primary.Claim, fo.Spec.Backup.Claim)
	}
	return nil
}

// FailoverReplication checks that the source and destination are strata's and
// join the Failover's primary claim to its backup claim.
func FailoverReplication(fo *failoverv1alpha1.Failover, rs *volsyncv1alpha1.ReplicationSource, rd *volsyncv1alpha1.ReplicationDestination) error {
	switch {
	case rs.Spec.External == nil || !volsyncv1alpha1.IsStrata(rs.Spec.External.Provider) ||
		rd.Spec.External == nil || rd.Spec.External.Provider != rs.Spec.External.Provider:
		return fmt.Errorf("the pair %s → %s is not strata's: both need one spec.external.provider, %s or %s",
			rs.Name, rd.Name, volsyncv1alpha1.ProviderBtrfs, volsyncv1alpha1.ProviderLVM)
	case rs.Spec.SourcePVC != fo.Spec.Primary.Claim:
		return fmt.Errorf("ReplicationSource %s replicates claim %s, not the primary claim %s", rs.Name, rs.Spec.SourcePVC, fo.Spec.Primary.Claim)
	case rs.Spec.External.Parameters[ParamDestination] != rd.Name:
		return fmt.Errorf("ReplicationSource %s sends to %q, not to ReplicationDestination %s", rs.Name, rs.Spec.External.Parameters[ParamDestination], rd.Name)
	case rd.Spec.External.Parameters[ParamDestinationPVC] != fo.Spec.Backup.Claim:
		return fmt.Errorf("ReplicationDestination %s is for claim %q, not the backup claim %s", rd.Name, rd.Spec.External.Parameters[ParamDestinationPVC], fo.Spec.Backup.Claim)
	}
	return nil
}

// FailoverSizes checks that the backup holds at least what the primary holds.
func FailoverSizes(fo *failoverv1alpha1.Failover, primary, backup *corev1.PersistentVolume) error {
	if backup.Spec.Capacity.Storage().Cmp(*primary.Spec.Capacity.Storage()) < 0 {
		return fmt.Errorf("backup claim %s (%s) is smaller than primary claim %s (%s): a promoted replica would not fit",
			fo.Spec.Backup.Claim, backup.Spec.Capacity.Storage(), fo.Spec.Primary.Claim, primary.Spec.Capacity.Storage())
	}
	return nil
}

// MoverOf is the provider that replicates a strata volume: strata.dev/btrfs
// for a btrfs volume, strata.dev/lvm for a logical volume; empty for a
// volume of another driver.
func MoverOf(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.CSI == nil || pv.Spec.CSI.Driver != storagev1alpha1.CSIDriver:
		return ""
	case IsBtrfsVolume(pv.Spec.CSI.VolumeAttributes):
		return volsyncv1alpha1.ProviderBtrfs
	}
	return volsyncv1alpha1.ProviderLVM
}

// CheckMover checks that provider is the mover of the claim's volume.
func CheckMover(provider, claim string, pv *corev1.PersistentVolume) error {
	switch mover := MoverOf(pv); {
	case mover == "":
		return fmt.Errorf("volume %s of claim %s is not a %s volume: strata's movers replicate strata's volumes", pv.Name, claim, storagev1alpha1.CSIDriver)
	case mover != provider:
		return fmt.Errorf("claim %s holds a volume that %s replicates, not %s: set spec.external.provider to %s", claim, mover, provider, mover)
	}
	return nil
}
