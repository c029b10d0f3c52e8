package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// A claim whose dataSourceRef names a VolumeImage is provisioned on the
// real nodes already holding the image's disk: a pod reads it back, as a
// raw block device from an LVM class, and as disk.raw from a node-local
// btrfs class. The image is a qcow2 in a real MinIO, reached from the
// pods at this machine's address on the cluster's bridge.
func TestAClaimIsFilledFromAVolumeImage(t *testing.T) {
	c, cl := start(t)
	minio := testenv.StartMinIOAt(t, network.HostIP().String())
	disk := make([]byte, 8<<20)
	_, _ = rand.Read(disk[:1<<20])
	copy(disk[4<<20:], "strata image volume")
	minio.Put(t, "images", testenv.WithChecksums(map[string][]byte{"vm/disk.qcow2": testenv.Qcow2(t, disk)}))
	want := sha256.Sum256(disk)

	ns := namespaceFor(t, cl, "images")
	create(t, cl,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bucket"},
			StringData: map[string]string{"accessKey": minio.AccessKey, "secretKey": minio.SecretKey}},
		&storagev1alpha1.VolumeImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm"}, Spec: storagev1alpha1.VolumeImageSpec{
			URL: minio.Endpoint + "/images/vm/disk.qcow2", Format: "qcow2", CredentialsSecretRef: &storagev1alpha1.LocalObjectReference{Name: "bucket"}}})

	block := newClaim(ns, "vm-block", "64Mi")
	mode := corev1.PersistentVolumeBlock
	block.Spec.VolumeMode = &mode
	blockReader := readerPod(ns, "block-reader", block.Name, len(disk))
	blockReader.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk", DevicePath: "/dev/vm"}}
	file := newClaim(ns, "vm-file", "64Mi")
	class := localClass(c.Nodes[0].Name())
	file.Spec.StorageClassName = &class
	fileReader := readerPod(ns, "file-reader", file.Name, len(disk))
	fileReader.Spec.Containers[0].Args[1] = "/data/disk.raw"
	fileReader.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "disk", MountPath: "/data"}}
	for _, claim := range []*corev1.PersistentVolumeClaim{block, file} {
		group := storagev1alpha1.GroupVersion.Group
		claim.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: storagev1alpha1.VolumeImageKind, Name: "vm"}
	}
	create(t, cl, block, blockReader, file, fileReader)
	for claim, pod := range map[*corev1.PersistentVolumeClaim]*corev1.Pod{block: blockReader, file: fileReader} {
		wantDigest(t, cl, claim, pod, want[:])
	}
}

// readerPod prints the digest of the first n bytes of the claim's disk;
// the caller mounts the claim.
func readerPod(ns, name, claim string, n int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "read", Image: stack.exampleApp, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"digest", "/dev/vm", fmt.Sprint(n)}}},
		Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
	}}
}

// wantDigest waits for the reader pod's digest of the claim's disk and
// checks it is want.
func wantDigest(t *testing.T, cl client.Client, claim *corev1.PersistentVolumeClaim, pod *corev1.Pod, want []byte) {
	t.Helper()
	ctx := context.Background()

	var line string
	testenv.Eventually(t, 4*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s is %s: %v; claim events: %s", pod.Name, pod.Status.Phase, pod.Status.Conditions, claimEvents(ctx, cl, claim))
		}
		logs, err := podLogs(pod)
		if line = strings.TrimSpace(logs); err != nil || line == "" {
			return fmt.Errorf("the reader has printed nothing yet (%v)", err)
		}
		return nil
	})
	if line != "sha256:"+hex.EncodeToString(want) {
		t.Fatalf("claim %s's disk hashes to %s; the image's disk to sha256:%x; claim events: %s",
			claim.Name, line, want, claimEvents(ctx, cl, claim))
	}
}

// claimEvents are the claim's events, for a failure's message.
func claimEvents(ctx context.Context, cl client.Client, claim *corev1.PersistentVolumeClaim) string {
	list := &corev1.EventList{}
	if err := cl.List(ctx, list, client.InNamespace(claim.Namespace)); err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == claim.Name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return strings.Join(out, " | ")
}
