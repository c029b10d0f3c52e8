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
	"github.com/strata-gitops/strata/internal/local/images"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// A claim whose dataSourceRef names a VolumeImage is provisioned on the
// real nodes already holding the image's disk: a pod reads it back as a
// raw block device. The image is a qcow2 in a real MinIO, reached from
// the pods at this machine's address on the cluster's bridge.
func TestAClaimIsFilledFromAVolumeImage(t *testing.T) {
	_, cl := start(t)
	ctx := context.Background()
	minio := testenv.StartMinIOAt(t, network.HostIP().String())
	disk := make([]byte, 8<<20)
	_, _ = rand.Read(disk[:1<<20])
	copy(disk[4<<20:], "strata image volume")
	minio.Put(t, "images", testenv.WithChecksums(map[string][]byte{"vm/disk.qcow2": testenv.Qcow2(t, disk)}))
	want := sha256.Sum256(disk)

	ns := namespaceFor(t, cl, "images")
	group, block := storagev1alpha1.GroupVersion.Group, corev1.PersistentVolumeBlock
	claim := newClaim(ns, "vm-disk", "64Mi")
	claim.Spec.VolumeMode = &block
	claim.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: storagev1alpha1.VolumeImageKind, Name: "vm"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "read", Image: images.ExampleAppRef, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"digest", "/dev/vm", fmt.Sprint(len(disk))}, VolumeDevices: []corev1.VolumeDevice{{Name: "disk", DevicePath: "/dev/vm"}}}},
		Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}},
	}}
	create(t, cl,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bucket"},
			StringData: map[string]string{"accessKey": minio.AccessKey, "secretKey": minio.SecretKey}},
		&storagev1alpha1.VolumeImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm"}, Spec: storagev1alpha1.VolumeImageSpec{
			URL: minio.Endpoint + "/images/vm/disk.qcow2", Format: "qcow2", CredentialsSecretRef: &storagev1alpha1.LocalObjectReference{Name: "bucket"}}},
		claim, pod)

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
	if line != "sha256:"+hex.EncodeToString(want[:]) {
		t.Fatalf("the populated claim's first %d bytes hash to %s; the image's disk to sha256:%x; claim events: %s",
			len(disk), line, want, claimEvents(ctx, cl, claim))
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
