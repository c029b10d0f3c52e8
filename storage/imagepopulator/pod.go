package imagepopulator

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// Where the pod sees the volume and the cache.
const (
	devicePath = "/dev/strata-target"
	targetDir  = "/target"
	cacheDir   = "/cache"
)

// meta is the metadata of the populator's objects for a claim.
func (r *Reconciler) meta(pvc *corev1.PersistentVolumeClaim) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: r.Namespace, Name: primeName(pvc),
		Labels: map[string]string{labelClaimNamespace: pvc.Namespace, labelClaimName: pvc.Name}}
}

// startFill starts the pod that fills the prime claim's volume, with a
// copy of the bucket credentials beside it.
func (r *Reconciler) startFill(ctx context.Context, pvc, prime *corev1.PersistentVolumeClaim, img *storagev1alpha1.VolumeImage) error {
	var env []corev1.EnvVar
	if ref := img.Spec.CredentialsSecretRef; ref != nil {
		var err error
		if env, err = r.copyCredentials(ctx, pvc, img.Namespace, ref.Name); err != nil {
			r.event(pvc, corev1.EventTypeWarning, "PopulateWaiting", "%v", err)
			return err
		}
	}
	pod := fillPod(r.meta(pvc), r.Image, r.CacheDir, prime, img, env)
	pod.Spec.Containers[0].Args = append(pod.Spec.Containers[0].Args, "--endpoints", strings.Join(r.Endpoints, ","))
	if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.event(pvc, corev1.EventTypeNormal, "Populating", "filling volume %s from %s in pod %s/%s", prime.Spec.VolumeName, img.Spec.URL, pod.Namespace, pod.Name)
	return nil
}

// copyCredentials copies the VolumeImage's credentials Secret beside the
// pod, which cannot read another namespace's, and returns the pod's
// environment from it.
func (r *Reconciler) copyCredentials(ctx context.Context, pvc *corev1.PersistentVolumeClaim, ns, name string) ([]corev1.EnvVar, error) {
	src := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, src); err != nil {
		return nil, fmt.Errorf("the VolumeImage's credentials Secret %s/%s: %w", ns, name, err)
	}
	if len(src.Data["accessKey"]) == 0 || len(src.Data["secretKey"]) == 0 {
		return nil, fmt.Errorf("the VolumeImage's credentials Secret %s/%s needs accessKey and secretKey", ns, name)
	}
	copied := &corev1.Secret{ObjectMeta: r.meta(pvc),
		Data: map[string][]byte{"accessKey": src.Data["accessKey"], "secretKey": src.Data["secretKey"]}}
	if err := r.Create(ctx, copied); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	from := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: copied.Name}, Key: key}}
	}
	return []corev1.EnvVar{{Name: "STRATA_IMAGE_ACCESS_KEY", ValueFrom: from("accessKey")},
		{Name: "STRATA_IMAGE_SECRET_KEY", ValueFrom: from("secretKey")}}, nil
}

// fillPod runs `strata image fill` onto the prime claim: its block
// device, or disk.raw in its filesystem.
func fillPod(meta metav1.ObjectMeta, image, hostCache string, prime *corev1.PersistentVolumeClaim, img *storagev1alpha1.VolumeImage, env []corev1.EnvVar) *corev1.Pod {
	format := img.Spec.Format
	if format == "" {
		format = "qcow2"
	}
	target := targetDir
	c := corev1.Container{Name: "fill", Image: image, Env: env,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: "cache", MountPath: cacheDir}},
		// It needs no privilege: the block device is the pod's own
		// (volumeDevices), and the cache and filesystem are written as
		// their owner, root.
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}
	if prime.Spec.VolumeMode != nil && *prime.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		target = devicePath
		c.VolumeDevices = []corev1.VolumeDevice{{Name: "target", DevicePath: devicePath}}
	} else {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "target", MountPath: targetDir})
	}
	c.Args = []string{"image", "fill", "--image-url", img.Spec.URL, "--type", format, "--target", target, "--cache-dir", cacheDir}
	if img.Spec.SHA256 != "" {
		c.Args = append(c.Args, "--sha256", img.Spec.SHA256)
	}
	hostPathType := corev1.HostPathDirectoryOrCreate
	return &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{c},
		Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Volumes: []corev1.Volume{
			{Name: "target", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: prime.Name}}},
			{Name: "cache", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostCache, Type: &hostPathType}}},
		},
	}}
}

func ptrTo[T any](v T) *T { return &v }
