package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// SchedulerExtras are the scheduler's own fields.
type SchedulerExtras struct {
	// IngressHost, when set, publishes the scheduler's admin page (HTTP
	// 7982) at this host through an Ingress.
	// +optional
	IngressHost string `json:"ingressHost,omitempty"`
}

// BrowserExtras are the browser's own fields.
type BrowserExtras struct {
	// IngressHost, when set, publishes the browser at this host through
	// an Ingress; it is also the URL the scheduler and workers link to.
	// +optional
	IngressHost string `json:"ingressHost,omitempty"`
}

// WorkerExtras are a worker's own fields.
type WorkerExtras struct {
	// RunnerImage is the image actions run in (the runner sidecar's),
	// pinned by tag or digest; it is also the platform's container-image
	// property.
	// +kubebuilder:validation:MinLength=1
	RunnerImage string `json:"runnerImage"`
	// RunnerInstallerImage puts bb_runner and tini into the runner; empty
	// is the controller's --buildbarn-image-repository with
	// bb-runner-installer, at Release.
	// +optional
	RunnerInstallerImage string `json:"runnerInstallerImage,omitempty"`
	// VolumeInitImage makes the build and cache directories with a shell
	// (`sh -c`) before the worker starts; empty is busybox at a pinned
	// tag.
	// +optional
	VolumeInitImage string `json:"volumeInitImage,omitempty"`
	// +optional
	RunnerResources corev1.ResourceRequirements `json:"runnerResources,omitempty"`
	// Instance is the instance name prefix the worker serves ("" is the
	// default instance).
	// +optional
	Instance string `json:"instance,omitempty"`
	// Concurrency is how many actions one worker pod runs at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=8
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`
}

// StorageExtras are the storage's own fields.
type StorageExtras struct {
	// StorageClassName is the class of the shards' claims; empty is
	// strata-fast, strata's thin LVM class.
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
	// CAS, AC and FSAC size each shard's content-addressable storage,
	// action cache and file-system access cache. Each is a claim sized
	// from its blocks and key-location map plus headroom.
	// +optional
	CAS Store `json:"cas,omitempty"`
	// +optional
	AC Store `json:"ac,omitempty"`
	// +optional
	FSAC Store `json:"fsac,omitempty"`
	// VolumeClaimTemplates override parts of the generated claims: a
	// template named cas, ac or fsac replaces that claim's access modes,
	// class and labels (its size still comes from the store). Other names
	// are refused.
	// +optional
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
}

// Store sizes one of a shard's stores: the blocks that hold the data and
// the key-location map that indexes them.
type Store struct {
	// BlocksSize is the space for data blocks. Defaults: CAS 32Gi, AC and
	// FSAC 20Mi.
	// +optional
	BlocksSize *resource.Quantity `json:"blocksSize,omitempty"`
	// KeyLocationMapSize is the index's size. Defaults: CAS 400Mi, AC and
	// FSAC 1Mi.
	// +optional
	KeyLocationMapSize *resource.Quantity `json:"keyLocationMapSize,omitempty"`
}
