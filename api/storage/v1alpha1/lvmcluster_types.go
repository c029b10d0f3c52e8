package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LVMCluster turns the local disks of the selected nodes into volume
// groups and thin pools, one per device class, each served through a
// StorageClass. The shape follows LVMS (lvm-operator) so its users know it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lvmc
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LVMCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LVMClusterSpec   `json:"spec"`
	Status LVMClusterStatus `json:"status,omitempty"`
}

// LVMClusterSpec is the desired storage.
type LVMClusterSpec struct {
	Storage Storage `json:"storage"`
	// Tolerations let the agents run on tainted nodes.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// Storage lists the device classes.
type Storage struct {
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.filter(c, has(c.default) && c.default).size() <= 1",message="at most one device class may be the default"
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.filter(d, d.name == c.name).size() == 1)",message="device class names must be unique"
	DeviceClasses []DeviceClass `json:"deviceClasses"`
}

// DeviceClass is one volume group per selected node, optionally with a
// thin pool, and the StorageClass that serves it.
type DeviceClass struct {
	// Name of the class; the volume group and the StorageClass
	// (strata-<name>) are named after it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Default makes its StorageClass the cluster's default.
	// +optional
	Default bool `json:"default,omitempty"`
	// FSType is the filesystem new volumes get.
	// +kubebuilder:validation:Enum=ext4;xfs
	// +kubebuilder:default=xfs
	// +optional
	FSType string `json:"fstype,omitempty"`
	// DeviceSelector names the disks, or opts in to taking every blank
	// disk of the node (discoverBlankDisks). Without either the class has
	// no disk and fails, saying so.
	// +optional
	DeviceSelector *DeviceSelector `json:"deviceSelector,omitempty"`
	// NodeSelector chooses the nodes; all nodes when empty.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`
	// ThinPoolConfig makes the class thin-provisioned.
	// +optional
	ThinPoolConfig *ThinPoolConfig `json:"thinPoolConfig,omitempty"`
	// +optional
	StorageClassOptions *StorageClassOptions `json:"storageClassOptions,omitempty"`
}

// DeviceSelector names disks by path, or opts in to discovery.
// +kubebuilder:validation:XValidation:rule="!has(self.discoverBlankDisks) || !self.discoverBlankDisks || ((!has(self.paths) || size(self.paths) == 0) && (!has(self.optionalPaths) || size(self.optionalPaths) == 0))",message="discoverBlankDisks takes every blank disk: use it without paths and optionalPaths"
type DeviceSelector struct {
	// Paths must all be present and usable on every selected node.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Paths []DevicePath `json:"paths,omitempty"`
	// OptionalPaths are used where present; the volume group grows when
	// one appears.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	OptionalPaths []DevicePath `json:"optionalPaths,omitempty"`
	// ForceWipeDevicesAndDestroyAllData wipes the named disks' signatures
	// (filesystems, partition tables, other LVM) before use, once per disk
	// per node. Everything on them is lost.
	// +optional
	ForceWipeDevicesAndDestroyAllData *bool `json:"forceWipeDevicesAndDestroyAllData,omitempty"`
	// DiscoverBlankDisks takes every blank whole disk of the node: no
	// partitions, signatures, mounts, holders or loop mappings. It cannot
	// tell a cloud volume just attached and not yet formatted from a new
	// disk, so it is an explicit opt-in; name disks by id in production.
	// Discovered disks are never wiped.
	// +optional
	DiscoverBlankDisks *bool `json:"discoverBlankDisks,omitempty"`
}

// DevicePath is a disk's path, e.g. /dev/vdb or /dev/disk/by-id/...
// +kubebuilder:validation:MaxLength=255
// +kubebuilder:validation:XValidation:rule="self.startsWith('/dev/') && !self.contains('/../') && !self.endsWith('/..')",message="device paths must be absolute and under /dev"
type DevicePath string

// ThinPoolConfig sizes the class's thin pool.
type ThinPoolConfig struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$`
	Name string `json:"name"`
	// SizePercent of the volume group the pool's data takes.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=90
	// +kubebuilder:default=90
	// +optional
	SizePercent int32 `json:"sizePercent,omitempty"`
	// OverprovisionRatio is how far thin volumes may overcommit the pool.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=10
	// +optional
	OverprovisionRatio int32 `json:"overprovisionRatio,omitempty"`
	// ChunkSize of the pool; lvm2 chooses when empty.
	// +optional
	ChunkSize *resource.Quantity `json:"chunkSize,omitempty"`
	// MetadataSize of the pool; lvm2 chooses when empty. It may grow later
	// (online), never shrink.
	// +optional
	MetadataSize *resource.Quantity `json:"metadataSize,omitempty"`
}

// StorageClassOptions shape the class's StorageClass.
type StorageClassOptions struct {
	// +kubebuilder:validation:Enum=Delete;Retain
	// +kubebuilder:default=Delete
	// +optional
	ReclaimPolicy *corev1.PersistentVolumeReclaimPolicy `json:"reclaimPolicy,omitempty"`
	// +kubebuilder:validation:Enum=Immediate;WaitForFirstConsumer
	// +kubebuilder:default=WaitForFirstConsumer
	// +optional
	VolumeBindingMode *storagev1.VolumeBindingMode `json:"volumeBindingMode,omitempty"`
	// +optional
	AdditionalParameters map[string]string `json:"additionalParameters,omitempty"`
	// +optional
	AdditionalLabels map[string]string `json:"additionalLabels,omitempty"`
}

// LVMClusterStatus aggregates what the agents report.
type LVMClusterStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// State is Progressing, Ready, Degraded or Failed.
	// +optional
	State string `json:"state,omitempty"`
	// +optional
	Ready bool `json:"ready,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	DeviceClassStatuses []DeviceClassStatus `json:"deviceClassStatuses,omitempty"`
}

// DeviceClassStatus is one class on every node.
type DeviceClassStatus struct {
	Name  string                  `json:"name"`
	Nodes []DeviceClassNodeStatus `json:"nodes,omitempty"`
}

// DeviceClassNodeStatus is one class on one node.
type DeviceClassNodeStatus struct {
	Node        string `json:"node"`
	VolumeGroup string `json:"volumeGroup,omitempty"`
	// State is Progressing, Ready, Degraded or Failed; Reason says why.
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// +optional
	Free *resource.Quantity `json:"free,omitempty"`
	// +optional
	ThinPool *ThinPoolStatus `json:"thinPool,omitempty"`
	// Devices in the volume group.
	// +optional
	Devices []string `json:"devices,omitempty"`
	// Excluded lists every device considered and not used, with why.
	// +optional
	Excluded []ExcludedDevice `json:"excluded,omitempty"`
	// Unselected lists devices in the group that the deviceSelector no
	// longer names. strata never takes a device out of a group: it stays,
	// with whatever data it holds, until moved off (pvmove) and removed
	// (vgreduce) by hand.
	// +optional
	Unselected []string `json:"unselected,omitempty"`
}

// ThinPoolStatus is how full a node's pool is.
type ThinPoolStatus struct {
	Name string `json:"name"`
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// DataPercent and MetadataPercent as lvm2 reports them, 0-100.
	DataPercent     string `json:"dataPercent,omitempty"`
	MetadataPercent string `json:"metadataPercent,omitempty"`
	// Full is set when no new thin volume is placed in the pool, and why.
	// +optional
	Full string `json:"full,omitempty"`
}

// ExcludedDevice is a device not used, with every reason.
type ExcludedDevice struct {
	Name    string   `json:"name"`
	Reasons []string `json:"reasons"`
}

// LVMClusterList is a list of LVMClusters.
// +kubebuilder:object:root=true
type LVMClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LVMCluster `json:"items"`
}

// GetConditions returns the status conditions.
func (c *LVMCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the status conditions.
func (c *LVMCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }
