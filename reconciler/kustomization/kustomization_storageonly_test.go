package kustomization_test

import (
	"context"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/app/manager"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// In storage-only mode (--engine=false) the controller serves its own
// kinds and never writes Flux's: with a GitRepository, a Kustomization and
// a Receiver present, it makes an LVMCluster's StorageClass, and Flux's
// objects are as they were (no finalizer, no status, the same
// resourceVersion).
func TestStorageOnlyModeLeavesFluxsObjectsAlone(t *testing.T) {
	s := newStack(t, func(o *manager.Options) { o.Engine = false })
	ctx := context.Background()
	s.push(map[string]string{"app/a.yaml": configMap("a")})
	objects := []client.Object{
		&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "flux-system", Namespace: s.ns, Labels: s.labels()},
			Spec: sourcev1.GitRepositorySpec{URL: s.repo.URL, Interval: metav1.Duration{Duration: time.Hour}}},
		&kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: s.ns, Labels: s.labels()},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./app", Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "flux-system"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: s.ns}, StringData: map[string]string{"token": "t"}},
		&notificationv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: s.ns, Labels: s.labels()},
			Spec: notificationv1.ReceiverSpec{Type: notificationv1.GenericReceiver, SecretRef: &meta.LocalObjectReference{Name: "token"},
				Resources: []notificationv1.ReceiverResource{{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{
					Kind: sourcev1.GitRepositoryKind, Name: "flux-system"}}}}},
	}
	for _, o := range objects {
		if err := s.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The controller is running and has seen the cluster: it made the
	// StorageClass of an LVMCluster created after Flux's objects.
	class := s.ns + "-fast"
	cluster := &storagev1alpha1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: s.ns},
		Spec: storagev1alpha1.LVMClusterSpec{Storage: storagev1alpha1.Storage{DeviceClasses: []storagev1alpha1.DeviceClass{{Name: class}}}}}
	if err := s.c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, func() error {
		return s.c.Get(ctx, client.ObjectKey{Name: storagev1alpha1.StorageClassName(class)}, &storagev1.StorageClass{})
	})
	for _, o := range objects {
		live := o.DeepCopyObject().(client.Object)
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatal(err)
		}
		if live.GetResourceVersion() != o.GetResourceVersion() || len(live.GetFinalizers()) > 0 {
			t.Errorf("%T %s was written in storage-only mode: resourceVersion %s → %s, finalizers %v",
				o, o.GetName(), o.GetResourceVersion(), live.GetResourceVersion(), live.GetFinalizers())
		}
	}
	if s.exists(cm("a")) {
		t.Error("storage-only mode applied a Kustomization")
	}
}
