package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogicalVolume is the hand-off between the CSI controller, which creates
// it for a volume or snapshot, and the agent of its node, which makes the
// volume and reports its device. Cluster-scoped, like TopoLVM's.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lv
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.deviceClass`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type LogicalVolume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LogicalVolumeSpec   `json:"spec"`
	Status LogicalVolumeStatus `json:"status,omitempty"`
}

// LogicalVolumeSpec is the volume wanted.
// +kubebuilder:validation:XValidation:rule="self.nodeName == oldSelf.nodeName && self.deviceClass == oldSelf.deviceClass",message="nodeName and deviceClass cannot change"
// +kubebuilder:validation:XValidation:rule="self.name == oldSelf.name",message="name cannot change: it is the volume's name in the volume group"
// +kubebuilder:validation:XValidation:rule="has(self.source) == has(oldSelf.source) && (!has(self.source) || self.source == oldSelf.source)",message="source cannot change"
// +kubebuilder:validation:XValidation:rule="quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0",message="size cannot shrink"
type LogicalVolumeSpec struct {
	// Name of the logical volume in the node's volume group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=127
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9+_.][a-zA-Z0-9+_.-]*$`
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	NodeName string `json:"nodeName"`
	// +kubebuilder:validation:MinLength=1
	DeviceClass string `json:"deviceClass"`
	// Size may grow, never shrink.
	Size resource.Quantity `json:"size"`
	// Source is the LogicalVolume this one is a thin snapshot of.
	// +optional
	Source string `json:"source,omitempty"`
}

// LogicalVolumeStatus is what the agent did.
type LogicalVolumeStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Device is the block device path on the node.
	// +optional
	Device string `json:"device,omitempty"`
	// +optional
	CurrentSize *resource.Quantity `json:"currentSize,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LogicalVolumeList is a list of LogicalVolumes.
// +kubebuilder:object:root=true
type LogicalVolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LogicalVolume `json:"items"`
}

// GetConditions returns the status conditions.
func (lv *LogicalVolume) GetConditions() []metav1.Condition { return lv.Status.Conditions }

// SetConditions replaces the status conditions.
func (lv *LogicalVolume) SetConditions(c []metav1.Condition) { lv.Status.Conditions = c }
