// Package rules holds the storage rules strata's controllers and its
// plan share, so that a plan judges a revision as the controllers will
// act on it and imports none of them: which StorageClasses are btrfs
// classes and where their volumes live (btrfsclass.go), how large a
// Buildbarn storage's stores are (buildbarn.go), and what a Failover's
// claims and VolSync pair must be (failover.go).
package rules

// StorageClass parameters of a btrfs class, the CSI driver's btrfs
// backend's. A class with AgentURL is a btrfs class; its volumes live on
// the storage host's agent.
const (
	AgentURLParameter = "agentURL"
	// AgentCASecretParameter names, as namespace/name, a Secret whose
	// ca.crt is the CA the class's agent's TLS certificate must chain to.
	AgentCASecretParameter = "agentCASecret"
	NFSServerParameter     = "nfsServer"
	// HostNodeParameter names the storage host's node when the class's
	// volumes are node-local: used on that node alone, by bind mount, their
	// PVs pinned to it by node affinity, as failover pairs need
	// (docs/failover.md). Without it, volumes are reached over NFS from
	// any node.
	HostNodeParameter = "hostNode"
	// TokenKey is the key of the tenant token in the CSI secrets and in
	// the Secret the class's provisioner-secret parameters name.
	TokenKey = "token"

	// BackendContext marks a btrfs volume in its volume context.
	BackendContext = "storage.strata.dev/backend"
	backendBtrfs   = "btrfs"
)

// IsBtrfsClass says whether StorageClass parameters are a btrfs class's.
func IsBtrfsClass(params map[string]string) bool { return params[AgentURLParameter] != "" }

// BtrfsVolumeContext is the volume context that marks a btrfs volume.
func BtrfsVolumeContext() map[string]string { return map[string]string{BackendContext: backendBtrfs} }

// IsBtrfsVolume says whether a volume context is a btrfs volume's.
func IsBtrfsVolume(volumeContext map[string]string) bool {
	return volumeContext[BackendContext] == backendBtrfs
}
