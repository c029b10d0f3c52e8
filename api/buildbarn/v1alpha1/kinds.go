package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BuildbarnSchedulerSpec is a BuildbarnScheduler's spec.
type BuildbarnSchedulerSpec struct {
	ComponentSpec   `json:",inline"`
	SchedulerExtras `json:",inline"`
}

// BuildbarnScheduler is the scheduler: the queue of actions between the frontends and the workers.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bbscheduler
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BuildbarnScheduler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BuildbarnSchedulerSpec `json:"spec,omitempty"`
	Status            ComponentStatus        `json:"status,omitempty"`
}

// BuildbarnSchedulerList is a list of BuildbarnSchedulers.
// +kubebuilder:object:root=true
type BuildbarnSchedulerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BuildbarnScheduler `json:"items"`
}

// GetComponent returns the spec every component has.
func (o *BuildbarnScheduler) GetComponent() *ComponentSpec { return &o.Spec.ComponentSpec }

// GetStatus returns the status.
func (o *BuildbarnScheduler) GetStatus() *ComponentStatus { return &o.Status }

// GetConditions returns the status conditions.
func (o *BuildbarnScheduler) GetConditions() []metav1.Condition { return o.Status.Conditions }

// SetConditions sets the status conditions.
func (o *BuildbarnScheduler) SetConditions(c []metav1.Condition) { o.Status.Conditions = c }

// BuildbarnStorageSpec is a BuildbarnStorage's spec.
type BuildbarnStorageSpec struct {
	ComponentSpec `json:",inline"`
	StorageExtras `json:",inline"`
}

// BuildbarnStorage is the storage shards: a StatefulSet of bb-storage, each pod one shard with its own CAS, AC and FSAC claims.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bbstorage
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BuildbarnStorage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BuildbarnStorageSpec `json:"spec,omitempty"`
	Status            ComponentStatus      `json:"status,omitempty"`
}

// BuildbarnStorageList is a list of BuildbarnStorages.
// +kubebuilder:object:root=true
type BuildbarnStorageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BuildbarnStorage `json:"items"`
}

// GetComponent returns the spec every component has.
func (o *BuildbarnStorage) GetComponent() *ComponentSpec { return &o.Spec.ComponentSpec }

// GetStatus returns the status.
func (o *BuildbarnStorage) GetStatus() *ComponentStatus { return &o.Status }

// GetConditions returns the status conditions.
func (o *BuildbarnStorage) GetConditions() []metav1.Condition { return o.Status.Conditions }

// SetConditions sets the status conditions.
func (o *BuildbarnStorage) SetConditions(c []metav1.Condition) { o.Status.Conditions = c }

// BuildbarnFrontendSpec is a BuildbarnFrontend's spec.
type BuildbarnFrontendSpec struct {
	ComponentSpec `json:",inline"`
}

// BuildbarnFrontend is the frontends Bazel talks to: they route blobs to the storage shards and actions to the scheduler.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bbfrontend
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BuildbarnFrontend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BuildbarnFrontendSpec `json:"spec,omitempty"`
	Status            ComponentStatus       `json:"status,omitempty"`
}

// BuildbarnFrontendList is a list of BuildbarnFrontends.
// +kubebuilder:object:root=true
type BuildbarnFrontendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BuildbarnFrontend `json:"items"`
}

// GetComponent returns the spec every component has.
func (o *BuildbarnFrontend) GetComponent() *ComponentSpec { return &o.Spec.ComponentSpec }

// GetStatus returns the status.
func (o *BuildbarnFrontend) GetStatus() *ComponentStatus { return &o.Status }

// GetConditions returns the status conditions.
func (o *BuildbarnFrontend) GetConditions() []metav1.Condition { return o.Status.Conditions }

// SetConditions sets the status conditions.
func (o *BuildbarnFrontend) SetConditions(c []metav1.Condition) { o.Status.Conditions = c }

// BuildbarnBrowserSpec is a BuildbarnBrowser's spec.
type BuildbarnBrowserSpec struct {
	ComponentSpec `json:",inline"`
	BrowserExtras `json:",inline"`
}

// BuildbarnBrowser is bb-browser, the web UI over the installation's storage.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bbbrowser
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BuildbarnBrowser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BuildbarnBrowserSpec `json:"spec,omitempty"`
	Status            ComponentStatus      `json:"status,omitempty"`
}

// BuildbarnBrowserList is a list of BuildbarnBrowsers.
// +kubebuilder:object:root=true
type BuildbarnBrowserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BuildbarnBrowser `json:"items"`
}

// GetComponent returns the spec every component has.
func (o *BuildbarnBrowser) GetComponent() *ComponentSpec { return &o.Spec.ComponentSpec }

// GetStatus returns the status.
func (o *BuildbarnBrowser) GetStatus() *ComponentStatus { return &o.Status }

// GetConditions returns the status conditions.
func (o *BuildbarnBrowser) GetConditions() []metav1.Condition { return o.Status.Conditions }

// SetConditions sets the status conditions.
func (o *BuildbarnBrowser) SetConditions(c []metav1.Condition) { o.Status.Conditions = c }

// BuildbarnWorkerSpec is a BuildbarnWorker's spec.
type BuildbarnWorkerSpec struct {
	ComponentSpec `json:",inline"`
	WorkerExtras  `json:",inline"`
}

// BuildbarnWorker is workers of one platform: bb-worker with a bb-runner sidecar.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bbworker
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BuildbarnWorker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BuildbarnWorkerSpec `json:"spec,omitempty"`
	Status            ComponentStatus     `json:"status,omitempty"`
}

// BuildbarnWorkerList is a list of BuildbarnWorkers.
// +kubebuilder:object:root=true
type BuildbarnWorkerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BuildbarnWorker `json:"items"`
}

// GetComponent returns the spec every component has.
func (o *BuildbarnWorker) GetComponent() *ComponentSpec { return &o.Spec.ComponentSpec }

// GetStatus returns the status.
func (o *BuildbarnWorker) GetStatus() *ComponentStatus { return &o.Status }

// GetConditions returns the status conditions.
func (o *BuildbarnWorker) GetConditions() []metav1.Condition { return o.Status.Conditions }

// SetConditions sets the status conditions.
func (o *BuildbarnWorker) SetConditions(c []metav1.Condition) { o.Status.Conditions = c }
