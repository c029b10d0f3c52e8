package backend

import (
	"context"
	"strconv"

	"golang.org/x/sys/unix"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The pod a NodePublishVolume is for, in its volume context: kubelet adds
// these when the CSIDriver has podInfoOnMount.
const (
	PodNameKey      = "csi.storage.k8s.io/pod.name"
	PodNamespaceKey = "csi.storage.k8s.io/pod.namespace"
)

// ChangePolicy is the fsGroupChangePolicy of the pod a publish is for:
// Always unless the pod, read through pods, asks OnRootMismatch. With
// VOLUME_MOUNT_GROUP kubelet hands the fsGroup to the driver but not the
// policy, so the driver reads it from the pod; when it cannot (no pod
// information, no API access) it does what Always does, which is slower
// but never wrong.
func ChangePolicy(ctx context.Context, pods client.Reader, volumeContext map[string]string) corev1.PodFSGroupChangePolicy {
	name, ns := volumeContext[PodNameKey], volumeContext[PodNamespaceKey]
	if pods == nil || name == "" || ns == "" {
		return corev1.FSGroupChangeAlways
	}
	pod := &corev1.Pod{}
	if err := pods.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return corev1.FSGroupChangeAlways
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroupChangePolicy != nil {
		return *sc.FSGroupChangePolicy
	}
	return corev1.FSGroupChangeAlways
}

// ApplyMountGroupWithPolicy gives a pod's fsGroup the whole volume, as
// ApplyMountGroup does recursively, except that with OnRootMismatch a
// volume whose root already belongs to the group, with the group's
// permissions, is left as it is: kubelet's own rule.
func ApplyMountGroupWithPolicy(root, group string, policy corev1.PodFSGroupChangePolicy) error {
	if group == "" {
		return nil
	}
	if policy == corev1.FSGroupChangeOnRootMismatch && rootHasGroup(root, group) {
		return nil
	}
	return ApplyMountGroup(root, group, true)
}

// rootHasGroup says whether root belongs to the group, is group-readable,
// -writable and -searchable, and setgid.
func rootHasGroup(root, group string) bool {
	gid, err := strconv.Atoi(group)
	var st unix.Stat_t
	if err != nil || unix.Stat(root, &st) != nil {
		return false
	}
	const want = 0o070 | unix.S_ISGID
	return int(st.Gid) == gid && st.Mode&want == want
}
