package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicationDestination receives what a ReplicationSource sends.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Last sync",type=string,format=date-time,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.lastSyncDuration`
// +kubebuilder:printcolumn:name="Next sync",type=string,format=date-time,JSONPath=`.status.nextSyncTime`
type ReplicationDestination struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ReplicationDestinationSpec `json:"spec,omitempty"`
	// +optional
	Status *ReplicationDestinationStatus `json:"status,omitempty"`
}

// ReplicationDestinationSpec is where replicas land and by which mover.
type ReplicationDestinationSpec struct {
	// +optional
	Trigger *ReplicationDestinationTriggerSpec `json:"trigger,omitempty"`
	// External hands the pair to a mover outside VolSync, such as
	// strata's (provider strata.dev/btrfs, parameter destinationPVC).
	// +optional
	External *ExternalSpec `json:"external,omitempty"`
	// +optional
	Paused bool `json:"paused,omitempty"`

	// VolSync's own movers: kept as written, not acted on by strata.
	// +optional
	Rsync *OtherMover `json:"rsync,omitempty"`
	// +optional
	RsyncTLS *OtherMover `json:"rsyncTLS,omitempty"`
	// +optional
	Rclone *OtherMover `json:"rclone,omitempty"`
	// +optional
	Restic *OtherMover `json:"restic,omitempty"`
}

// ReplicationDestinationTriggerSpec is VolSync's destination trigger.
type ReplicationDestinationTriggerSpec struct {
	// +kubebuilder:validation:Pattern=`^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// +optional
	Manual string `json:"manual,omitempty"`
}

// ReplicationDestinationStatus is VolSync's status of a destination.
type ReplicationDestinationStatus struct {
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// +optional
	LastSyncStartTime *metav1.Time `json:"lastSyncStartTime,omitempty"`
	// +optional
	LastSyncDuration *metav1.Duration `json:"lastSyncDuration,omitempty"`
	// +optional
	NextSyncTime *metav1.Time `json:"nextSyncTime,omitempty"`
	// +optional
	LastManualSync string `json:"lastManualSync,omitempty"`
	// LatestImage is the newest complete replica. For strata's mover it
	// names the destination claim, which a promotion fills from it.
	// +optional
	LatestImage *corev1.TypedLocalObjectReference `json:"latestImage,omitempty"`
	// +optional
	LatestMoverStatus *MoverStatus `json:"latestMoverStatus,omitempty"`
	// +optional
	External map[string]string `json:"external,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ReplicationDestinationList is a list of ReplicationDestinations.
// +kubebuilder:object:root=true
type ReplicationDestinationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReplicationDestination `json:"items"`
}
