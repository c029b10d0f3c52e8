package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ComponentSpec is what every Buildbarn component has.
type ComponentSpec struct {
	// Release is the Buildbarn release the component runs, the same on
	// every component of the installation (set it once, e.g. with a
	// Kustomization's postBuild substitution). It is the tag of an Image
	// given without one, and what the Version column shows.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`
	// +optional
	Release string `json:"release,omitempty"`
	// AllowVersionSkew accepts components of other releases in the
	// installation; without it a mix is reported as Degraded, since
	// Buildbarn's components are released and tested together.
	// +optional
	AllowVersionSkew bool `json:"allowVersionSkew,omitempty"`
	// Image is the component's container image: a repository, which
	// takes Release as its tag, or a reference pinned by tag or digest.
	// Empty is the controller's --buildbarn-image-repository with the
	// component's image name. ":latest" is refused.
	// +optional
	Image string `json:"image,omitempty"`
	// Replicas is the number of pods; for storage, of shards.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// ConfigMapName names a ConfigMap of the user's that replaces the
	// generated configuration: it holds the component's configuration
	// files under the same keys the generated one does.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
	// ServiceType is the component's Service type; the frontend's
	// defaults to LoadBalancer, the others' to ClusterIP.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// State values of a component's status.
const (
	StateReady    = "Ready"
	StateNotReady = "NotReady"
	// StateNotFound: the component's workload does not exist (yet).
	StateNotFound = "NotFound"
)

// Condition types, as kstatus reads them.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
)

// ComponentStatus is what every component reports.
type ComponentStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// State is Ready, NotReady or NotFound.
	// +optional
	State string `json:"state,omitempty"`
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Version is the release the component runs (spec.release, or the
	// image's tag).
	// +optional
	Version string `json:"version,omitempty"`
	// Image is the image the pods run.
	// +optional
	Image string `json:"image,omitempty"`
	// ConfigHash is the hash of the configuration the pods were given;
	// a change rolls them.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Component is implemented by the five kinds.
// +kubebuilder:object:generate=false
type Component interface {
	metav1.Object
	GetComponent() *ComponentSpec
	GetStatus() *ComponentStatus
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}
