package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicationSource replicates a claim to a ReplicationDestination.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.sourcePVC`
// +kubebuilder:printcolumn:name="Last sync",type=string,format=date-time,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.lastSyncDuration`
// +kubebuilder:printcolumn:name="Next sync",type=string,format=date-time,JSONPath=`.status.nextSyncTime`
type ReplicationSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ReplicationSourceSpec `json:"spec,omitempty"`
	// +optional
	Status *ReplicationSourceStatus `json:"status,omitempty"`
}

// ReplicationSourceSpec is what to replicate, when, and by which mover.
type ReplicationSourceSpec struct {
	// SourcePVC is the claim to replicate, in this namespace.
	SourcePVC string `json:"sourcePVC,omitempty"`
	// +optional
	Trigger *ReplicationSourceTriggerSpec `json:"trigger,omitempty"`
	// External hands the pair to a mover outside VolSync, such as
	// strata's (provider strata.dev/btrfs).
	// +optional
	External *ExternalSpec `json:"external,omitempty"`
	// Paused stops syncs until it is false again.
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
	// +optional
	Syncthing *OtherMover `json:"syncthing,omitempty"`
}

// ReplicationSourceTriggerSpec is when a sync starts: on a cron
// schedule, when Manual changes, or, with neither, as soon as the last
// one ended (continuous).
type ReplicationSourceTriggerSpec struct {
	// Schedule is a five-field cron schedule.
	// +kubebuilder:validation:Pattern=`^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Manual starts one sync each time it is set to a new value; once it
	// is done status.lastManualSync holds the same value.
	// +optional
	Manual string `json:"manual,omitempty"`
}

// ReplicationSourceStatus is VolSync's status of a source.
type ReplicationSourceStatus struct {
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
	// +optional
	LatestMoverStatus *MoverStatus `json:"latestMoverStatus,omitempty"`
	// External is the mover's own status; strata's lists the replica
	// number, the stream bytes of the last sync and the destination's
	// agent.
	// +optional
	External map[string]string `json:"external,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ReplicationSourceList is a list of ReplicationSources.
// +kubebuilder:object:root=true
type ReplicationSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReplicationSource `json:"items"`
}
