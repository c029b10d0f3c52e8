package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LVMVolumeGroupNodeStatus is what one node's agent reports: it is named
// after the node and lives in the LVMCluster's namespace. The controller
// aggregates these into the LVMCluster's status.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lvmvgns
type LVMVolumeGroupNodeStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status NodeStatus `json:"status,omitempty"`
}

// NodeStatus is a node's device classes, the wipes done on it and the
// logical volumes no LogicalVolume claims.
type NodeStatus struct {
	// +optional
	DeviceClasses []DeviceClassNodeStatus `json:"deviceClasses,omitempty"`
	// Wiped records every device wiped on this node, so that a wipe
	// happens at most once per device.
	// +optional
	Wiped []WipedDevice `json:"wiped,omitempty"`
	// Unclaimed lists logical volumes in strata's groups that no
	// LogicalVolume object claims. They are never deleted automatically.
	// +optional
	Unclaimed []string `json:"unclaimed,omitempty"`
	// Retained lists strata's volume groups on this node that no device
	// class selected for the node has any more. They and their data are
	// kept until an LVMCluster of the namespace carries
	// strata.dev/allow-data-loss: "true" and no LogicalVolume uses them.
	// +optional
	Retained []RetainedGroup `json:"retained,omitempty"`
}

// RetainedGroup is a volume group kept after its device class went.
type RetainedGroup struct {
	Name string `json:"name"`
	// Devices are the group's physical volumes.
	// +optional
	Devices []string `json:"devices,omitempty"`
	// Reason says why it is kept and what removes it.
	Reason string `json:"reason"`
}

// WipedDevice is one wipe.
type WipedDevice struct {
	Device string `json:"device"`
	// ID is the device's stable ID (its /dev/disk/by-id name, WWID or
	// loop backing file): the wipe is remembered by it, since /dev/sdX
	// names change across reboots.
	// +optional
	ID string      `json:"id,omitempty"`
	At metav1.Time `json:"at"`
	// Signatures that were on it, as wipefs named them.
	// +optional
	Signatures []string `json:"signatures,omitempty"`
}

// LVMVolumeGroupNodeStatusList is a list of node statuses.
// +kubebuilder:object:root=true
type LVMVolumeGroupNodeStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LVMVolumeGroupNodeStatus `json:"items"`
}
