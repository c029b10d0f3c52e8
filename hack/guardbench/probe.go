package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func fluxBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flux-kustomize-controller"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "flux-system", Name: "kustomize-controller"}}}
}

// probeConfig is the admin's configuration, kept to make Flux's client
// for the probe.
var probeConfig *rest.Config

// waitFor waits until a dry-run delete of an unannotated claim by Flux is
// refused (registered) or allowed (not), for up to a minute.
func waitFor(ctx context.Context, admin client.Client, registered bool) error {
	probe := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guard-probe"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := client.IgnoreAlreadyExists(admin.Create(ctx, probe)); err != nil {
		return err
	}
	flux, err := client.New(testenv.ServiceAccountConfig(probeConfig, "flux-system", "kustomize-controller"), client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		err := flux.Delete(ctx, probe, client.DryRunAll)
		refused := err != nil && strings.Contains(err.Error(), "blocked")
		if refused == registered {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the API server did not act on the webhook's registration (registered: %v) within a minute", registered)
}
