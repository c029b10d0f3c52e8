package up

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/local/release"
)

// Each node's disks: two for its LVM volume group (the second optional in
// the repository's LVMCluster) and a third formatted btrfs, the base of
// the node's btrfs storage host. They are sparse files: only what is written takes
// space.
var diskSizes = []int64{8 << 30, 8 << 30, 32 << 30}

// staticVolumePath is the directory inside each node behind the
// repository's static PersistentVolumes.
const staticVolumePath = "/var/lib/strata/static/nvme1"

// startCluster starts the control plane and the nodes and waits until
// the nodes are Ready.
func startCluster(ctx context.Context, o Options, built *release.Built, say func(string, ...any)) (*cluster.Cluster, error) {
	co := o.Cluster
	if len(co.Nodes) < 2 {
		return nil, fmt.Errorf("the example repository needs two nodes, %v has %d", co.Nodes, len(co.Nodes))
	}
	co.Dir = filepath.Join(o.StateDir, "cluster")
	pause, err := built.Ref(cluster.RegistryName, "pause")
	if err != nil {
		return nil, err
	}
	co.Registry, co.PauseImage, co.Disks = filepath.Join(o.Bin, "registry"), pause, diskSizes
	hosts := btrfsHosts(o, "")
	co.BtrfsMounts, co.Labels = hosts.Mounts(btrfsDisk), hosts.Labels()
	co.CRDDirs = []string{filepath.Join(o.Root, "charts", "strata", "crds")}
	say("starting kube-apiserver, etcd, the controller manager and the scheduler (state in %s; logs in %s)",
		co.Dir, filepath.Join(co.Dir, "logs"))
	c, err := cluster.Start(ctx, co)
	if err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		say("node %s at %s: kubelet and containerd in their own network and mount namespaces (logs in %s)",
			n.Name(), n.IP(), filepath.Join(co.Dir, "nodes", n.Name(), "logs"))
	}
	if err := c.WaitReady(ctx, 5*time.Minute); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	say("nodes Ready")
	return c, nil
}

// btrfsHosts are the btrfs storage hosts: every node, each serving the
// volumes of its own btrfs disk, with the repository's tenant. The
// repository's shared volumes are on the second node's; node-local
// classes use each node's own (clusters/homelab, failover pairs).
func btrfsHosts(o Options, token string) release.BtrfsHost {
	return release.BtrfsHost{Nodes: o.Cluster.Nodes, Base: btrfsBase, Tenant: btrfsTenant, Token: token, TokenSecret: btrfsTokenSecret}
}

// install installs strata with its chart, a btrfs storage host on each
// node with the repository's tenant.
func install(ctx context.Context, o Options, c *cluster.Cluster, cl client.Client, built *release.Built, say func(string, ...any)) error {
	token, err := btrfsToken(filepath.Join(o.StateDir, "btrfs-token"))
	if err != nil {
		return err
	}
	host := btrfsHosts(o, token)
	say("pushing release %s to the cluster's registry %s (the nodes' %s) and installing it with helm from oci://%s/charts/strata into %s (controller, agents, CSI driver, btrfs storage hosts on %s); waiting for its pods",
		built.Version, c.Registry(), cluster.RegistryName, c.Registry(), namespace, strings.Join(host.Nodes, ", "))
	err = release.Install(ctx, cl, release.Options{Release: built, Registry: c.Registry(), RegistryName: cluster.RegistryName,
		Kubectl: filepath.Join(o.Bin, "k8s", "kubectl"), Kubeconfig: c.KubeconfigPath(), Namespace: namespace,
		Set: append(host.Values(), release.ControllersOn(c.Nodes[1].Name())...), Objects: host.Secrets(namespace)}, 10*time.Minute)
	if err != nil {
		return err
	}
	say("strata is running")
	return nil
}

// describeNodes tells the example repository about this cluster through
// the ConfigMap flux-system/node-disks, which its Kustomizations
// substitute from: the disks, the nodes of the static volumes, and the
// btrfs storage host. It also makes the static volumes' directories.
func describeNodes(ctx context.Context, cl client.Client, c *cluster.Cluster) error {
	for _, n := range c.Nodes {
		dir, ok := n.HostPath(staticVolumePath)
		if !ok {
			return fmt.Errorf("node %s has no directory behind %s", n.Name(), staticVolumePath)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	host := c.Nodes[1]
	data := map[string]string{
		"disk_1": kubenode.DiskPath(1), "disk_2": kubenode.DiskPath(2),
		"node_1": c.Nodes[0].Name(), "node_2": c.Nodes[1].Name(),
		"static_volume_path": staticVolumePath,
		"btrfs_host_node":    host.Name(),
		"btrfs_agent_url":    fmt.Sprintf("https://%s:8420", host.IP()),
		"btrfs_nfs_server":   host.IP().String(),
	}
	for i, n := range c.Nodes { // each node's own btrfs host, for node-local classes
		data[fmt.Sprintf("btrfs_agent_url_%d", i+1)] = fmt.Sprintf("https://%s:8420", n.IP())
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}}
	if err := cl.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "node-disks", Namespace: fluxNamespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, cl, cm, func() error {
		cm.Data = data
		return nil
	})
	return err
}

// controllerIP is the address of strata's controller pod.
func controllerIP(ctx context.Context, cl client.Client) (string, error) {
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "controller"}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return p.Status.PodIP, nil
		}
	}
	return "", fmt.Errorf("strata's controller has no pod with an address in %s", namespace)
}
