package up

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Deployment whose pod cannot be scheduled says why in up's output: a
// claim of a WaitForFirstConsumer class stays Pending without a word of
// its own, and only its pod's PodScheduled condition names the cause.
func TestAnUnreadyAppSaysWhatItsPodWaitsFor(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "apps"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}}}}
	unschedulable := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: "apps", Labels: map[string]string{"app": "app"}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/2 nodes are available: 2 node(s) did not have enough free storage."}}}}
	pulling := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-2", Namespace: "apps", Labels: map[string]string{"app": "app"}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}}
	other := unschedulable
	other.Name, other.Labels = "other", map[string]string{"app": "other"}

	ready, waiting, err := podsReadySince([]corev1.Pod{other, unschedulable}, d, time.Now())
	if err != nil || ready != 0 || !strings.Contains(waiting, "pod app-1: 0/2 nodes are available: 2 node(s) did not have enough free storage") {
		t.Errorf("an unschedulable pod: ready %d, waiting %q, %v", ready, waiting, err)
	}
	if _, waiting, _ := podsReadySince([]corev1.Pod{pulling}, d, time.Now()); waiting != "pod app-2: ErrImagePull not found" {
		t.Errorf("a container that cannot start: waiting %q", waiting)
	}
	if _, waiting, _ := podsReadySince([]corev1.Pod{other}, d, time.Now()); waiting != "" {
		t.Errorf("another app's pod is not this one's reason: %q", waiting)
	}
}
