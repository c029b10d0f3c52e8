package e2e

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/local/release"
	"github.com/strata-gitops/strata/rules"
)

// The btrfs storage hosts of the suite: both nodes, each's base a btrfs
// disk of its own, with one tenant. This machine's kernel has no NFS
// client, so the suite's btrfs volumes are used on their storage host
// itself, where the CSI node service bind-mounts them. btrfsClass is a
// class as for NFS, on e2e-b; localClass(node) is each node's
// node-local class, whose volumes are pinned to it.
const btrfsClass = "strata-btrfs-e2e"

// btrfsClassNode is the host of btrfsClass's volumes.
var btrfsClassNode = "e2e-b"

func localClass(node string) string { return "strata-btrfs-local-" + node }

var btrfsHost = release.BtrfsHost{Nodes: []string{"e2e-a", "e2e-b"}, Base: "/var/lib/strata/btrfs",
	Tenant: "e2e", Token: "e2e-tenant-token-0123456789", TokenSecret: "btrfs-token"}

// makeBtrfsClasses makes btrfsClass and each host's node-local class.
func makeBtrfsClasses(ctx context.Context, c client.Client, nodes []*kubenode.Node, hosts release.BtrfsHost) error {
	for _, n := range nodes {
		if n.Name() == btrfsClassNode {
			if err := makeBtrfsClass(ctx, c, btrfsClass, n.IP().String(), ""); err != nil {
				return err
			}
		}
		if slices.Contains(hosts.Nodes, n.Name()) {
			if err := makeBtrfsClass(ctx, c, localClass(n.Name()), n.IP().String(), n.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeBtrfsClass makes a StorageClass of the volumes of the host at
// hostIP, trusting the CA the chart made for the host's agent; with
// hostNode, a node-local one.
func makeBtrfsClass(ctx context.Context, c client.Client, name, hostIP, hostNode string) error {
	params := map[string]string{
		rules.AgentURLParameter:      "https://" + hostIP + ":8420",
		rules.NFSServerParameter:     hostIP,
		rules.AgentCASecretParameter: release.CASecret(namespace),
		// Copies of the class (Kubernetes' storage e2e makes them) name
		// it, so that they are told apart from it.
		storagev1alpha1.StorageClassParameter: name,
	}
	if hostNode != "" {
		params[rules.HostNodeParameter] = hostNode
	}
	for _, call := range []string{"provisioner", "controller-publish", "controller-expand"} {
		params["csi.storage.k8s.io/"+call+"-secret-name"] = btrfsHost.TokenSecret
		params["csi.storage.k8s.io/"+call+"-secret-namespace"] = namespace
	}
	expand := true
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: storagev1alpha1.CSIDriver, Parameters: params,
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
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: btrfsClassNode}
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
