package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// The ledger on a pair of logical volumes, replicated by the LVM mover
// node agent to node agent: after a power loss of A, B serves every line
// A held before the last sync.
func TestLVMFailoverOnRealNodes(t *testing.T) {
	c, cl := start(t)
	l := newLedgerOf(t, c, cl, "lvm-failover", volsyncv1alpha1.ProviderLVM)
	l.sync("one", l.a)
	loss := l.losePower(c)
	t.Logf("node loss to app on B, from A's last Lease renewal: detected %s, promoted %s, pod serving %s (data age %s)",
		loss.detect, loss.promote, loss.serving, loss.dataAge)
}

// bindOn binds a WaitForFirstConsumer claim on node with a pod that
// mounts it there, and deletes the pod once the claim is bound.
func bindOn(t testing.TB, cl client.Client, claim *corev1.PersistentVolumeClaim, node *kubenode.Node) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: "bind-" + claim.Name}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: node.Name()}, TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{Name: "hold", Image: stack.pause, ImagePullPolicy: corev1.PullIfNotPresent,
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}},
	}}
	create(t, cl, pod)
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		if claim.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %s/%s is %s", claim.Namespace, claim.Name, claim.Status.Phase)
		}
		return nil
	})
	if err := cl.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s/%s is still there (%v)", pod.Namespace, pod.Name, err)
		}
		return nil
	})
}
