package kustomization_test

import (
	"context"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestHealthChecksRunAtEveryRevision: spec.healthChecks may name objects
// the Kustomization does not apply, so every reconcile checks them, even
// one that skips the build because the new revision changed nothing the
// Kustomization reads.
func TestHealthChecksRunAtEveryRevision(t *testing.T) {
	s := newStack(t)
	// No controller runs Deployments here: the test writes the status.
	marker := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "marker", Namespace: s.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "marker"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "marker"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
	if err := s.c.Create(context.Background(), marker); err != nil {
		t.Fatal(err)
	}
	setProgressing := func(status corev1.ConditionStatus, reason string) {
		t.Helper()
		marker.Status = appsv1.DeploymentStatus{ObservedGeneration: marker.Generation, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason},
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
		}}
		if err := s.c.Status().Update(context.Background(), marker); err != nil {
			t.Fatal(err)
		}
	}
	setProgressing(corev1.ConditionTrue, "NewReplicaSetAvailable")
	rev := s.push(map[string]string{"app/cm.yaml": configMap("app"), "other/cm.yaml": configMap("other")})
	s.source(rev)
	s.kustomization("app", "./app", func(ks *kustomizev1.Kustomization) {
		ks.Spec.HealthChecks = []meta.NamespacedObjectKindReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "marker", Namespace: s.ns}}
	})
	s.waitReady("app", rev)
	setProgressing(corev1.ConditionFalse, "ProgressDeadlineExceeded")
	rev = s.push(map[string]string{"other/cm.yaml": configMap("other", "key", "changed")})
	s.refresh(rev)
	s.waitCondition("app", meta.ReadyCondition, metav1.ConditionFalse, meta.HealthCheckFailedReason, "marker")
}
