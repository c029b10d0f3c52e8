package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeImageKind is the kind a claim's spec.dataSourceRef names to be
// filled from an image (docs/images.md).
const VolumeImageKind = "VolumeImage"

// VolumeImageSpec names a VM disk image in an S3 bucket.
type VolumeImageSpec struct {
	// URL is the image: http(s)://<endpoint>/<bucket>/<object>, path-style
	// as MinIO serves it; .gz, .zst and .xz are decompressed.
	// +kubebuilder:validation:Pattern=`^https?://[^/]+/[^/]+/.+$`
	URL string `json:"url"`
	// Format is the image's format, checked against its header.
	// +kubebuilder:validation:Enum=qcow2;raw
	// +kubebuilder:default=qcow2
	// +optional
	Format string `json:"format,omitempty"`
	// SHA256 is the image's digest, hex; empty reads the object
	// <object>.sha256 beside it. The bytes are checked against it.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// CredentialsSecretRef names a Secret in the VolumeImage's namespace
	// with accessKey and secretKey for the bucket; none reads it
	// anonymously.
	// +optional
	CredentialsSecretRef *LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// VolumeImage declares an image that claims are filled from: a claim
// whose spec.dataSourceRef names it is provisioned already holding the
// image's disk, raw (docs/images.md). Changing it fills later claims
// only: a claim is filled once, when it is made.
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Format",type=string,JSONPath=`.spec.format`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VolumeImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VolumeImageSpec `json:"spec"`
}

// VolumeImageList is a list of VolumeImages.
// +kubebuilder:object:root=true
type VolumeImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeImage `json:"items"`
}
