package objects

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/buildbarn/config"
)

// Deployment runs a stateless component.
func Deployment(o Owner, replicas int32, tmpl corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: o.meta(o.Name),
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: o.Selector()}, Template: tmpl}}
}

// Claim is one of a shard's claims: its name (cas, ac or fsac), where
// it is mounted, and the template it is made from.
type Claim struct {
	Name, MountPath string
	Template        corev1.PersistentVolumeClaim
}

// StatefulSet runs the storage shards, each with its own claims. Claims
// stay when the set is scaled down or deleted unless deleteClaims: they
// hold the shard's data, and only the data-loss opt-in lets them go.
func StatefulSet(o Owner, replicas int32, tmpl corev1.PodTemplateSpec, claims []Claim, deleteClaims bool) *appsv1.StatefulSet {
	policy := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if deleteClaims {
		policy = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	ss := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: o.meta(o.Name),
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, ServiceName: o.Name, Selector: &metav1.LabelSelector{MatchLabels: o.Selector()},
			// Shards are independent: start and replace them all at once.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: policy, WhenScaled: policy},
		}}
	main := &tmpl.Spec.Containers[0]
	for _, c := range claims {
		t := c.Template
		t.Name = c.Name
		ss.Spec.VolumeClaimTemplates = append(ss.Spec.VolumeClaimTemplates, t)
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: c.Name, MountPath: c.MountPath})
	}
	ss.Spec.Template = tmpl
	return ss
}

// WorkerImages are the images of a worker pod's containers.
type WorkerImages struct {
	Runner, RunnerInstaller, VolumeInit string
	RunnerResources                     corev1.ResourceRequirements
}

// AddRunner makes a worker's pod template: bb_worker with the runner
// sidecar beside it. bb-runner-installer puts tini and bb_runner into a
// volume the runner image starts them from, and volume-init makes the
// build directory every user may write and the cache only the worker
// may. The worker gets its pod's and node's names for its ID.
func AddRunner(tmpl *corev1.PodTemplateSpec, img WorkerImages) {
	const tools, work = "bb", "worker"
	spec := &tmpl.Spec
	worker := &spec.Containers[0]
	worker.VolumeMounts = append(worker.VolumeMounts, corev1.VolumeMount{Name: work, MountPath: config.WorkerPath})
	worker.Env = []corev1.EnvVar{fieldEnv("NODE_NAME", "spec.nodeName"), fieldEnv("POD_NAME", "metadata.name")}
	nobody, no := int64(65534), false
	spec.Containers = append(spec.Containers, corev1.Container{
		Name: "runner", Image: img.Runner, Resources: img.RunnerResources,
		Command:         []string{"/bb/tini", "-v", "--", "/bb/bb_runner", ConfigDir + "/" + config.RunnerFile},
		SecurityContext: &corev1.SecurityContext{RunAsUser: &nobody, AllowPrivilegeEscalation: &no},
		VolumeMounts: []corev1.VolumeMount{
			{Name: configVolume, MountPath: ConfigDir, ReadOnly: true},
			{Name: work, MountPath: config.WorkerPath},
			{Name: tools, MountPath: "/bb", ReadOnly: true},
		},
	})
	spec.InitContainers = []corev1.Container{
		{Name: "runner-installer", Image: img.RunnerInstaller, VolumeMounts: []corev1.VolumeMount{{Name: tools, MountPath: "/bb/"}}},
		{Name: "volume-init", Image: img.VolumeInit, Command: []string{"sh", "-c",
			fmt.Sprintf("mkdir -pm 0777 %[1]s/build && mkdir -pm 0700 %[1]s/cache && chmod 0777 %[1]s", config.WorkerPath)},
			VolumeMounts: []corev1.VolumeMount{{Name: work, MountPath: config.WorkerPath}}},
	}
	spec.Volumes = append(spec.Volumes,
		corev1.Volume{Name: tools, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: work, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// Ingress publishes a component's HTTP port at host.
func Ingress(o Owner, host string, port string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}, ObjectMeta: o.meta(o.Name),
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: o.Name, Port: networkingv1.ServiceBackendPort{Name: port}}}}}},
		}}}}}
}
