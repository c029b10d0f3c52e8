package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
)

// The btrfs storage host of the suite: node e2e-b, its base a btrfs disk
// of its own, with one tenant. This machine's kernel has no NFS client,
// so the suite's btrfs volumes are used on the storage host itself,
// where the CSI node service bind-mounts them.
const (
	btrfsBase   = "/var/lib/strata/btrfs"
	btrfsClass  = "strata-btrfs-e2e"
	btrfsTenant = "e2e"
	btrfsToken  = "e2e-tenant-token-0123456789"
)

var btrfsHostValues = []string{
	"btrfsHost.enabled=true",
	`btrfsHost.nodeSelector.kubernetes\.io/hostname=e2e-b`,
	"btrfsHost.base=" + btrfsBase,
	// Ganesha's files are the node's own; no Ganesha runs, as no node
	// could mount its exports: the agent records each export, the node
	// service bind-mounts on the host.
	"btrfsHost.ganeshaExports=/var/lib/strata/ganesha/strata-exports.conf",
	"btrfsHost.ganeshaPIDFile=/var/lib/strata/ganesha/ganesha.pid",
	"btrfsHost.tenantsSecret=btrfs-tenants",
}

// tenants makes the namespace and the Secret of the host's tenants before
// the chart is installed.
func tenants(ctx context.Context, c client.Client) error {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "btrfs-tenants", Namespace: namespace},
			StringData: map[string]string{btrfsTenant: btrfsToken}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "btrfs-token", Namespace: namespace},
			StringData: map[string]string{btrfsbackend.TokenKey: btrfsToken}},
	} {
		if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	return nil
}

// makeBtrfsClass makes the StorageClass of the host's volumes, trusting the CA
// the chart made for the host's agent.
func makeBtrfsClass(ctx context.Context, c client.Client, hostIP string) error {
	params := map[string]string{
		btrfsbackend.AgentURLParameter:      "https://" + hostIP + ":8420",
		btrfsbackend.NFSServerParameter:     hostIP,
		btrfsbackend.AgentCASecretParameter: namespace + "/strata-agent-ca-public",
	}
	for _, call := range []string{"provisioner", "controller-publish", "controller-expand"} {
		params["csi.storage.k8s.io/"+call+"-secret-name"] = "btrfs-token"
		params["csi.storage.k8s.io/"+call+"-secret-namespace"] = namespace
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: btrfsClass}, Provisioner: storagev1alpha1.CSIDriver, Parameters: params}
	return client.IgnoreAlreadyExists(c.Create(ctx, sc))
}

// A claim on the btrfs storage host keeps what its pod wrote for the
// next pod, used on the host itself by bind mount.
func TestBtrfsVolumeOnTheStorageHost(t *testing.T) {
	_, cl := start(t)
	ns := namespaceFor(t, cl, "btrfs")
	class := btrfsClass
	claim := newClaim(ns, "shared", "1Gi")
	claim.Spec.StorageClassName = &class
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	pod := appPod(ns, "app", claim.Name)
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "e2e-b"}
	create(t, cl, claim, pod)
	first := waitServing(t, pod)
	ctx := context.Background()
	if err := cl.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	again := appPod(ns, "again", claim.Name)
	again.Spec.NodeSelector = pod.Spec.NodeSelector
	create(t, cl, again)
	if second := waitServing(t, again); second != first {
		t.Fatalf("the second pod read %q from the btrfs volume, the first wrote %q", second, first)
	}
}
