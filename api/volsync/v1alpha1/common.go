package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ProviderBtrfs is the external provider strata's btrfs mover answers
// to: agent to agent, incremental `btrfs send` of read-only snapshots.
const ProviderBtrfs = "strata.dev/btrfs"

// ProviderLVM is the external provider strata's LVM mover answers to:
// node agent to node agent, a block delta between thin snapshots.
const ProviderLVM = "strata.dev/lvm"

// IsStrata says whether a provider is one of strata's movers.
func IsStrata(provider string) bool { return provider == ProviderBtrfs || provider == ProviderLVM }

// ExternalSpec hands a pair to an external mover, VolSync's extension
// point: Provider names the mover (domain/name), Parameters are its own.
type ExternalSpec struct {
	// Provider is the mover, such as strata.dev/btrfs or strata.dev/lvm.
	Provider string `json:"provider,omitempty"`
	// Parameters are the mover's settings; docs/failover.md lists
	// strata's.
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
}

// MoverResult is how the latest mover run ended.
type MoverResult string

// The results VolSync reports.
const (
	MoverResultSuccessful MoverResult = "Successful"
	MoverResultFailed     MoverResult = "Failed"
)

// MoverStatus is VolSync's summary of the latest mover run.
type MoverStatus struct {
	// +optional
	Result MoverResult `json:"result,omitempty"`
	// Logs is the run's summary: what was sent and how much.
	// +optional
	Logs string `json:"logs,omitempty"`
}

// ConditionSynchronizing is VolSync's one condition; it is True while a
// sync runs.
const ConditionSynchronizing = "Synchronizing"

// The reasons of ConditionSynchronizing, as VolSync gives them.
const (
	SynchronizingReasonSync    = "SyncInProgress"
	SynchronizingReasonSched   = "WaitingForSchedule"
	SynchronizingReasonManual  = "WaitingForManual"
	SynchronizingReasonCleanup = "CleaningUp"
	SynchronizingReasonError   = "Error"
)

// OtherMover is the settings of one of VolSync's own movers (rsync,
// restic, ...), kept as written: strata does not act on them, VolSync
// does where it is installed.
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:Schemaless
// +kubebuilder:validation:Type=object
type OtherMover struct {
	runtime.RawExtension `json:",inline"`
}

// GetConditions returns the source's conditions.
func (s *ReplicationSource) GetConditions() []metav1.Condition {
	if s.Status == nil {
		return nil
	}
	return s.Status.Conditions
}

// SetConditions sets the source's conditions.
func (s *ReplicationSource) SetConditions(c []metav1.Condition) {
	if s.Status == nil {
		s.Status = &ReplicationSourceStatus{}
	}
	s.Status.Conditions = c
}

// GetConditions returns the destination's conditions.
func (d *ReplicationDestination) GetConditions() []metav1.Condition {
	if d.Status == nil {
		return nil
	}
	return d.Status.Conditions
}

// SetConditions sets the destination's conditions.
func (d *ReplicationDestination) SetConditions(c []metav1.Condition) {
	if d.Status == nil {
		d.Status = &ReplicationDestinationStatus{}
	}
	d.Status.Conditions = c
}
