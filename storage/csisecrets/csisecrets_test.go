package csisecrets_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/csisecrets"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The CSI controller's token reads the Secrets strata's classes name, and
// no other Secret, even beside them; when no class names a Secret any
// more, it reads none. Checked by a real API server's RBAC.
func TestTheCSIControllerReadsOnlyTheSecretsItsClassesName(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	system, apps := testenv.Namespace(t, env.Client, "csisec-system"), testenv.Namespace(t, env.Client, "csisec-apps")
	for _, s := range []client.ObjectKey{{Namespace: system, Name: "agent-ca"}, {Namespace: system, Name: "other"},
		{Namespace: apps, Name: "tenant-token"}, {Namespace: apps, Name: "database-password"}} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csisec-btrfs"}, Provisioner: storagev1alpha1.CSIDriver,
		Parameters: map[string]string{"agentCASecret": system + "/agent-ca",
			"csi.storage.k8s.io/provisioner-secret-name": "tenant-token", "csi.storage.k8s.io/provisioner-secret-namespace": apps}}
	if err := env.Client.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	account := client.ObjectKey{Namespace: system, Name: "csi-controller"}
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return (&csisecrets.Reconciler{Client: mgr.GetClient(), Account: account, Name: "csi-controller-secrets"}).SetupWithManager(mgr)
	})
	csi, err := client.New(testenv.ServiceAccountConfig(env.Config, account.Namespace, account.Name), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	reads := func(ns, name string) error {
		return csi.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, s := range [][2]string{{system, "agent-ca"}, {apps, "tenant-token"}} {
			if err := reads(s[0], s[1]); err != nil {
				return fmt.Errorf("the CSI controller reading %s/%s, which a class names: %v", s[0], s[1], err)
			}
		}
		return nil
	})
	for _, s := range [][2]string{{system, "other"}, {apps, "database-password"}} {
		if err := reads(s[0], s[1]); !apierrors.IsForbidden(err) {
			t.Errorf("the CSI controller reading %s/%s, which no class names: %v; want forbidden", s[0], s[1], err)
		}
	}
	if err := env.Client.Delete(ctx, sc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := reads(apps, "tenant-token"); !apierrors.IsForbidden(err) {
			return fmt.Errorf("after the class went, reading its Secret: %v; want forbidden", err)
		}
		return nil
	})
}
