// Package objects builds the Kubernetes objects that run a Buildbarn
// component: its ConfigMap, pod template, Deployment or StatefulSet,
// Service and Ingress. Each builder returns the object as strata wants it
// to be, for server-side apply; it reads nothing from the cluster.
package objects

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/strata-gitops/strata/buildbarn/config"
)

// Labels and annotations on what strata makes for a component.
const (
	ComponentLabel = "app.kubernetes.io/component"
	InstanceLabel  = "app.kubernetes.io/instance"
	PartOfLabel    = "app.kubernetes.io/part-of"
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ConfigHashAnnotation on the pod template is the configuration's
	// hash: a changed configuration changes the template, which rolls the
	// pods.
	ConfigHashAnnotation = "buildbarn.strata.dev/config-hash"
	configVolume         = "config"
	// ConfigDir is where the configuration files are mounted.
	ConfigDir = "/config"
)

// Owner is the component an object belongs to.
type Owner struct {
	Name, Namespace string
	// Component is scheduler, storage, frontend, browser or worker.
	Component string
	Ref       metav1.OwnerReference
}

// Selector are the labels that pick the component's pods.
func (o Owner) Selector() map[string]string {
	return map[string]string{ComponentLabel: o.Component, InstanceLabel: o.Name}
}

func (o Owner) labels() map[string]string {
	l := o.Selector()
	l[PartOfLabel] = "buildbarn"
	l[ManagedByLabel] = "strata"
	return l
}

func (o Owner) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: o.labels(), OwnerReferences: []metav1.OwnerReference{o.Ref}}
}

// ConfigMapName is the generated configuration's ConfigMap.
func (o Owner) ConfigMapName() string { return o.Name + "-config" }

// ConfigMap holds the generated configuration files.
func ConfigMap(o Owner, files config.Files) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: o.meta(o.ConfigMapName()), Data: files}
}

// Hash is the configuration's hash, over its files in name order.
func Hash(files map[string]string) string {
	h := sha256.New()
	for _, k := range config.Files(files).Keys() {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(files[k]), files[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Pod is what a component's pod template is made of.
type Pod struct {
	Owner     Owner
	Image     string
	Resources corev1.ResourceRequirements
	// ConfigMap is mounted at /config; ConfigHash goes on the template.
	ConfigMap, ConfigHash string
	// Args start the program: its configuration file.
	Args  []string
	Ports []corev1.ContainerPort

	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	ImagePullSecrets []corev1.LocalObjectReference
}

// Port is a named TCP container port.
func Port(name string, port int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP}
}

// Template is the component's pod template: one container running the
// program with its configuration mounted, and the diagnostics port that
// Prometheus scrapes.
func Template(p Pod) corev1.PodTemplateSpec {
	ports := append(append([]corev1.ContainerPort{}, p.Ports...), Port("diagnostics", config.DiagnosticsPort))
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: p.Owner.labels(), Annotations: map[string]string{
			ConfigHashAnnotation:   p.ConfigHash,
			"prometheus.io/scrape": "true",
			"prometheus.io/port":   strconv.Itoa(config.DiagnosticsPort),
		}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: p.Owner.Component, Image: p.Image, Args: p.Args, Ports: ports, Resources: p.Resources,
				VolumeMounts: []corev1.VolumeMount{{Name: configVolume, MountPath: ConfigDir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: configVolume, VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: p.ConfigMap}}}}},
			NodeSelector:     p.NodeSelector,
			Tolerations:      p.Tolerations,
			ImagePullSecrets: p.ImagePullSecrets,
		},
	}
}

// Service exposes the ports; a headless one gives each pod its own name
// (the storage shards).
func Service(o Owner, typ corev1.ServiceType, headless bool, ports []corev1.ContainerPort) *corev1.Service {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: o.meta(o.Name),
		Spec: corev1.ServiceSpec{Selector: o.Selector(), Type: typ}}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		// Shards are addressed by name before they are ready: a shard
		// that restarts must stay reachable by its peers' config.
		svc.Spec.PublishNotReadyAddresses = true
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Port: p.ContainerPort, TargetPort: intstr.FromString(p.Name), Protocol: corev1.ProtocolTCP})
	}
	return svc
}
