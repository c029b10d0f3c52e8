package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/buildbarn/objects"
)

// manager converges one object a component owns, as openshift's
// lvm-operator has one resource manager per owned object.
type manager interface {
	name() string
	ensure(ctx context.Context, r *Reconciler, s *scope) error
}

// configMapManager applies the generated configuration; with the user's
// ConfigMap in its place, a generated one left from before is removed.
type configMapManager struct{}

func (configMapManager) name() string { return "ConfigMap" }

func (configMapManager) ensure(ctx context.Context, r *Reconciler, s *scope) error {
	generated := objects.ConfigMap(s.owner, s.files)
	if s.userConfig {
		return r.deleteOwned(ctx, s, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: generated.Name, Namespace: generated.Namespace}})
	}
	return r.apply(ctx, s, generated)
}

// pod is the component's pod template, before kind-specific additions.
func pod(s *scope, args []string, ports []corev1.ContainerPort) corev1.PodTemplateSpec {
	return objects.Template(objects.Pod{
		Owner: s.owner, Image: s.image.Ref, Resources: s.spec.Resources,
		ConfigMap: s.configMap, ConfigHash: s.hash, Args: args, Ports: ports,
		NodeSelector: s.spec.NodeSelector, Tolerations: s.spec.Tolerations, ImagePullSecrets: s.spec.ImagePullSecrets,
	})
}

// deploymentManager runs a stateless component; extend adds what a
// kind's pods have beyond the one container (the worker's runner).
type deploymentManager struct {
	args   []string
	ports  []corev1.ContainerPort
	extend func(*Reconciler, *scope, *corev1.PodTemplateSpec) error
}

func (deploymentManager) name() string { return "Deployment" }

func (m deploymentManager) ensure(ctx context.Context, r *Reconciler, s *scope) error {
	tmpl := pod(s, m.args, m.ports)
	if m.extend != nil {
		if err := m.extend(r, s, &tmpl); err != nil {
			return err
		}
	}
	d := objects.Deployment(s.owner, s.replicas(), tmpl)
	if err := r.apply(ctx, s, d); err != nil {
		return err
	}
	s.workload = deploymentState(d)
	return nil
}

// serviceManager exposes the component's ports.
type serviceManager struct {
	ports       []corev1.ContainerPort
	defaultType corev1.ServiceType
	headless    bool
}

func (serviceManager) name() string { return "Service" }

func (m serviceManager) ensure(ctx context.Context, r *Reconciler, s *scope) error {
	typ := s.spec.ServiceType
	if typ == "" {
		typ = m.defaultType
	}
	if m.headless {
		typ = corev1.ServiceTypeClusterIP
	}
	return r.apply(ctx, s, objects.Service(s.owner, typ, m.headless, m.ports))
}

// ingressManager publishes the component's HTTP port at the spec's
// host, and removes the Ingress when the host is cleared.
type ingressManager struct {
	host func(*scope) string
	port string
}

func (ingressManager) name() string { return "Ingress" }

func (m ingressManager) ensure(ctx context.Context, r *Reconciler, s *scope) error {
	host := m.host(s)
	if host == "" {
		return r.deleteOwned(ctx, s, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: s.owner.Name, Namespace: s.owner.Namespace}})
	}
	return r.apply(ctx, s, objects.Ingress(s.owner, host, m.port))
}

// workload is the owned Deployment's or StatefulSet's state, as status
// reports it.
type workload struct {
	found                               bool
	generation, observedGeneration      int64
	replicas, ready, updated, available int32
	desired                             int32
	failure                             string
	// replacing: the workload is being deleted to be made again (new
	// claim templates), so it is not rolled out whatever its status says.
	replacing bool
}

func deploymentState(d *appsv1.Deployment) workload {
	w := workload{found: true, generation: d.Generation, observedGeneration: d.Status.ObservedGeneration,
		replicas: d.Status.Replicas, ready: d.Status.ReadyReplicas, updated: d.Status.UpdatedReplicas,
		available: d.Status.AvailableReplicas, desired: *d.Spec.Replicas}
	for _, c := range d.Status.Conditions {
		failed := c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue ||
			c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse
		if failed {
			w.failure = c.Reason + ": " + c.Message
		}
	}
	return w
}

func statefulSetState(ss *appsv1.StatefulSet) workload {
	return workload{found: true, generation: ss.Generation, observedGeneration: ss.Status.ObservedGeneration,
		replicas: ss.Status.Replicas, ready: ss.Status.ReadyReplicas, updated: ss.Status.UpdatedReplicas,
		available: ss.Status.AvailableReplicas, desired: *ss.Spec.Replicas}
}
