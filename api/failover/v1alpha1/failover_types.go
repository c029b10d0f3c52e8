package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Failover keeps one app running on node-local storage when its node
// is lost: the app runs on the primary claim, a VolSync pair replicates
// that claim to the backup claim on another node, and when the primary
// node stops renewing its lease strata fences it, promotes the backup
// from its newest complete replica and moves the workload there.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=fo
// +kubebuilder:printcolumn:name="Workload",type=string,JSONPath=`.spec.workload.name`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Failover struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FailoverSpec `json:"spec"`
	// +optional
	Status FailoverStatus `json:"status,omitempty"`
}

// FailoverSpec names the app, its two sides and the pair between them.
// +kubebuilder:validation:XValidation:rule="self.primary.node != self.backup.node",message="primary and backup must be on different nodes: a pair on one node survives no node loss"
// +kubebuilder:validation:XValidation:rule="self.primary.claim != self.backup.claim",message="primary and backup must be different claims"
type FailoverSpec struct {
	Workload WorkloadReference `json:"workload"`
	// Primary is where the app runs while its node is healthy.
	Primary Side `json:"primary"`
	// Backup is where the app runs after a failover.
	Backup Side `json:"backup"`
	// Replication names the VolSync pair: a ReplicationSource of the
	// primary claim and a ReplicationDestination of the backup claim,
	// both with provider strata.dev/btrfs, in this namespace.
	Replication ReplicationReference `json:"replication"`
	// +optional
	Policy Policy `json:"policy,omitempty"`
}

// WorkloadReference is a Deployment or StatefulSet in this namespace.
type WorkloadReference struct {
	// +kubebuilder:validation:Enum=Deployment;StatefulSet
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Side is one node and the claim the app uses there.
type Side struct {
	// +kubebuilder:validation:MinLength=1
	Node string `json:"node"`
	// Claim is a PersistentVolumeClaim in this namespace bound to a
	// volume on Node.
	// +kubebuilder:validation:MinLength=1
	Claim string `json:"claim"`
}

// ReplicationReference names the two halves of a VolSync pair.
type ReplicationReference struct {
	// +kubebuilder:validation:MinLength=1
	Source string `json:"source"`
	// +kubebuilder:validation:MinLength=1
	Destination string `json:"destination"`
}

// FencingMode is how a lost node is kept from writing before the backup
// is promoted.
// +kubebuilder:validation:Enum=AgentSelfFence;OutOfServiceTaint;Manual
type FencingMode string

// The fencing modes.
const (
	// FencingAgentSelfFence: an agent that cannot renew its lease stops
	// the I/O of replicated volumes on its node itself; the promotion
	// waits the safe time that lease and fence timings give.
	FencingAgentSelfFence FencingMode = "AgentSelfFence"
	// FencingOutOfServiceTaint: strata taints the lost node
	// node.kubernetes.io/out-of-service and removes the taint on failback.
	FencingOutOfServiceTaint FencingMode = "OutOfServiceTaint"
	// FencingManual: a person confirms with the annotation
	// failover.strata.dev/fenced: "<node>".
	FencingManual FencingMode = "Manual"
)

// FailbackMode is whether strata moves the app back on its own.
// +kubebuilder:validation:Enum=Manual;Automatic
type FailbackMode string

// The failback modes.
const (
	FailbackManual    FailbackMode = "Manual"
	FailbackAutomatic FailbackMode = "Automatic"
)

// Policy is when and how strata fails over and back.
type Policy struct {
	// UnreachableAfter is how long the primary node's lease may go
	// unrenewed before strata fails over.
	// +kubebuilder:default="15s"
	// +optional
	UnreachableAfter metav1.Duration `json:"unreachableAfter,omitempty"`
	// +kubebuilder:default=AgentSelfFence
	// +optional
	Fencing FencingMode `json:"fencing,omitempty"`
	// MaxDataAge bounds the data age an automatic failover may serve: a
	// newest replica older than this waits for a person
	// (failover.strata.dev/accept-data-age: "true").
	// +kubebuilder:default="1h"
	// +optional
	MaxDataAge metav1.Duration `json:"maxDataAge,omitempty"`
	// +kubebuilder:default=Manual
	// +optional
	Failback FailbackMode `json:"failback,omitempty"`
}

// ActiveSide is the side the app runs on.
type ActiveSide string

// The sides.
const (
	ActivePrimary ActiveSide = "Primary"
	ActiveBackup  ActiveSide = "Backup"
)

// Phase is where a Failover is in its cycle.
type Phase string

// The phases, in the order a failover and a failback go through them.
const (
	PhaseProtected   Phase = "Protected"   // primary active, pair replicating
	PhaseUnreachable Phase = "Unreachable" // the primary's lease expired
	PhaseFencing     Phase = "Fencing"
	PhasePromoting   Phase = "Promoting"
	PhaseFailedOver  Phase = "FailedOver" // the app runs on the backup
	PhaseResyncing   Phase = "Resyncing"  // the old primary, demoted, receives the changes
	PhaseFailingBack Phase = "FailingBack"
	PhaseWaiting     Phase = "WaitingForPerson" // a refusal a person must resolve
)

// FailoverStatus is what strata observed and did.
type FailoverStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Active ActiveSide `json:"active,omitempty"`
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// DataAgeAtPromotion is how old the replica the backup was promoted
	// from was: what the failover lost at most.
	// +optional
	DataAgeAtPromotion *metav1.Duration `json:"dataAgeAtPromotion,omitempty"`
	// FencedBy says which mode fenced which node.
	// +optional
	FencedBy string `json:"fencedBy,omitempty"`
	// FailbackStreamBytes is what the latest failback sent back to the
	// primary: only what changed while the app ran on the backup.
	// +optional
	FailbackStreamBytes int64 `json:"failbackStreamBytes,omitempty"`
	// FailbackReplica is the replica the backup sent once its app was
	// quiesced, which the failback promotes on the primary; set only
	// while a failback runs, so that a retried switch does not send again.
	// +optional
	FailbackReplica uint64 `json:"failbackReplica,omitempty"`
	// +optional
	Timestamps PhaseTimestamps `json:"timestamps,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PhaseTimestamps are when the latest failover or failback reached each
// step, to the microsecond: a failover takes seconds, and its parts are
// what its benchmark reports.
type PhaseTimestamps struct {
	// +optional
	Detected *metav1.MicroTime `json:"detected,omitempty"`
	// +optional
	Fenced *metav1.MicroTime `json:"fenced,omitempty"`
	// +optional
	Promoted *metav1.MicroTime `json:"promoted,omitempty"`
	// +optional
	Started *metav1.MicroTime `json:"started,omitempty"`
	// +optional
	FailedBack *metav1.MicroTime `json:"failedBack,omitempty"`
}

// FailoverList is a list of Failovers.
// +kubebuilder:object:root=true
type FailoverList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Failover `json:"items"`
}

// GetConditions returns the Failover's conditions.
func (f *Failover) GetConditions() []metav1.Condition { return f.Status.Conditions }

// SetConditions sets the Failover's conditions.
func (f *Failover) SetConditions(c []metav1.Condition) { f.Status.Conditions = c }

// The policy's defaults, which a zero or missing field takes.
const (
	DefaultUnreachableAfter = 15 * time.Second
	DefaultMaxDataAge       = time.Hour
)

// WithDefaults is the policy with each zero field at its default: a
// client that sends "0s" gets the same as one that leaves it out.
func (p Policy) WithDefaults() Policy {
	if p.UnreachableAfter.Duration <= 0 {
		p.UnreachableAfter.Duration = DefaultUnreachableAfter
	}
	if p.Fencing == "" {
		p.Fencing = FencingAgentSelfFence
	}
	if p.MaxDataAge.Duration <= 0 {
		p.MaxDataAge.Duration = DefaultMaxDataAge
	}
	if p.Failback == "" {
		p.Failback = FailbackManual
	}
	return p
}
