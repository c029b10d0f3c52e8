package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/release"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
)

// The btrfs storage host of the suite: node e2e-b, its base a btrfs disk
// of its own, with one tenant. This machine's kernel has no NFS client,
// so the suite's btrfs volumes are used on the storage host itself,
// where the CSI node service bind-mounts them.
const btrfsClass = "strata-btrfs-e2e"

var btrfsHost = release.BtrfsHost{Node: "e2e-b", Base: "/var/lib/strata/btrfs",
	Tenant: "e2e", Token: "e2e-tenant-token-0123456789", TokenSecret: "btrfs-token"}

// makeBtrfsClass makes the StorageClass of the host's volumes, trusting the CA
// the chart made for the host's agent.
func makeBtrfsClass(ctx context.Context, c client.Client, hostIP string) error {
	params := map[string]string{
		btrfsbackend.AgentURLParameter:      "https://" + hostIP + ":8420",
		btrfsbackend.NFSServerParameter:     hostIP,
		btrfsbackend.AgentCASecretParameter: release.CASecret(namespace),
		// Copies of the class (Kubernetes' storage e2e makes them) name
		// it, so that they are told apart from it.
		storagev1alpha1.StorageClassParameter: btrfsClass,
	}
	for _, call := range []string{"provisioner", "controller-publish", "controller-expand"} {
		params["csi.storage.k8s.io/"+call+"-secret-name"] = btrfsHost.TokenSecret
		params["csi.storage.k8s.io/"+call+"-secret-namespace"] = namespace
	}
	expand := true
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: btrfsClass}, Provisioner: storagev1alpha1.CSIDriver, Parameters: params,
		AllowVolumeExpansion: &expand}
	return client.IgnoreAlreadyExists(c.Create(ctx, sc))
}

// A claim on the btrfs storage host keeps what its pod wrote for the
// next pod, used on the host itself by bind mount, and grows.
func TestBtrfsVolumeOnTheStorageHost(t *testing.T) {
	_, cl := start(t)
	ns := namespaceFor(t, cl, "btrfs")
	class := btrfsClass
	claim := newClaim(ns, "shared", "1Gi")
	claim.Spec.StorageClassName = &class
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	pod := appPod(ns, "app", claim.Name)
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: btrfsHost.Node}
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
	// Growing it takes the class's expand secret, the tenant's token.
	if err := cl.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	grow(t, cl, claim, "2Gi")
}
