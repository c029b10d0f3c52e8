package v1alpha1

// Keys shared by the agents, which write them, and the controllers and
// the CSI driver, which read them.

// CapacityAnnotationPrefix + device class, on a Node, is the size in bytes
// a new volume of the class can have there, for topology-aware placement.
const CapacityAnnotationPrefix = "capacity.strata.dev/"

// LogicalVolumeTag is the lvm2 tag that names, on the volume itself, the
// LogicalVolume it belongs to: a volume nobody claims can be told apart,
// and the node's agent finds a LogicalVolume's volume without the API.
func LogicalVolumeTag(name string) string { return LogicalVolumeTagPrefix + name }

// LogicalVolumeTagPrefix starts the tag of every logical volume a
// LogicalVolume made: what marks a volume as strata's.
const LogicalVolumeTagPrefix = "strata.dev/logicalvolume="

// LogicalVolumeFinalizer keeps a LogicalVolume until its node's agent has
// removed its volume. The CSI driver sets it when it creates the object,
// the agent when it finds it missing.
const LogicalVolumeFinalizer = "storage.strata.dev/logicalvolume"

// AllowDataLossAnnotation, set to "true", opts an object in to changes
// that destroy data: the engine's guard reads it on objects in Git, the
// agent on LVMClusters before it removes a volume group.
const AllowDataLossAnnotation = "strata.dev/allow-data-loss"

// CSIDriver is the CSI driver that serves every strata StorageClass.
const CSIDriver = "strata.csi.strata.dev"

// StorageClass parameters the LVMCluster controller writes and the CSI
// driver reads.
const (
	// DeviceClassParameter tells the CSI driver which class a volume is in.
	DeviceClassParameter = "storage.strata.dev/device-class"
	// StorageClassParameter is the StorageClass's own name, which CSI
	// calls do not carry, for the driver's volume IDs.
	StorageClassParameter = "storage.strata.dev/storage-class"
)

// StorageClassName is the StorageClass of a device class.
func StorageClassName(class string) string { return "strata-" + class }

// States of a device class on a node (LVMVolumeGroupNodeStatus) and of an
// LVMCluster as a whole.
const (
	StateReady  = "Ready"
	StateFailed = "Failed"
)

// SelectedNodeAnnotation is the scheduler's, on a claim of a
// WaitForFirstConsumer class: the node its first pod goes to. The image
// populator provisions there; the dashboard shows it as the claim's node.
const SelectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// Labels and annotations on the image populator's prime claims and pods
// (docs/images.md): the claim they fill, how many fills failed, and when
// the next may start. The dashboard reads them to show a fill's stage.
const (
	PopulatorClaimNamespaceLabel = "populator.strata.dev/claim-namespace"
	PopulatorClaimNameLabel      = "populator.strata.dev/claim-name"
	PopulatorFailuresAnnotation  = "populator.strata.dev/failures"
	PopulatorRetryAtAnnotation   = "populator.strata.dev/retry-at"
)

// AgentSigner is the signer of the node agents' serving certificates:
// an agent asks for one with a CertificateSigningRequest, and strata's
// controller, which alone holds the agents' CA key, signs it for the
// agent's own node.
const AgentSigner = "strata.dev/agent-serving"

// NodeNameExtra is the key of a service account token's user extra
// that names the node its pod runs on, which the API server sets.
const NodeNameExtra = "authentication.kubernetes.io/node-name"
