// Package cluster runs a small, real Kubernetes cluster on this machine
// for `strata up` and the end-to-end suite: kube-apiserver and etcd,
// kube-controller-manager and kube-scheduler on the host, and nodes
// (internal/local/kubenode) each with its own kubelet, containerd and
// network namespace, running images built from local files
// (internal/local/images). docs/development.md, "The local cluster",
// draws it.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/controlplane"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/local/process"
	"github.com/strata-gitops/strata/internal/scheme"
)

// Options describe the cluster.
type Options struct {
	// Dir holds all the cluster's state; a cluster started again on the
	// same Dir finds its etcd, certificates and nodes' state.
	Dir string
	// Bin holds the Kubernetes binaries (hack/control-plane.sh nodes).
	Bin   string
	Nodes []string
	// Network is the nodes' segment and pod ranges.
	Network kubenode.Network
	// ServiceCIDR is the Services' range; its first address is the
	// kubernetes Service's.
	ServiceCIDR netip.Prefix
	CRDDirs     []string
	// Registry is the OCI registry program (hack/tools.sh registry). The
	// cluster runs it on the host, at Registry(), storing under Dir, and
	// every node's containerd pulls from it: nothing is imported.
	Registry string
	// PauseImage is the pods' sandbox image, a reference in the registry.
	PauseImage string
	// Disks are the sizes of each node's disks (kubenode.DiskPath).
	Disks []int64
	// BtrfsMounts are the btrfs disks of nodes, by node name
	// (kubenode.Options.BtrfsMounts).
	BtrfsMounts map[string]map[string]int
	// Labels are nodes' own labels, by node name.
	Labels map[string]map[string]string
}

// Defaults are two nodes, strata-a and strata-b, on 10.77.0.0/24 with
// pods in 10.244.0.0/16 and Services in 10.96.0.0/16: addresses that live
// only in this machine's own bridge and network namespaces.
func Defaults(dir, bin string) Options {
	return Options{
		Dir: dir, Bin: bin, Nodes: []string{"strata-a", "strata-b"},
		Network: kubenode.Network{Bridge: "strata0", Prefix: netip.MustParsePrefix("10.77.0.0/24"),
			PodPrefix: netip.MustParsePrefix("10.244.0.0/16")},
		ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
	}
}

// Cluster is a running cluster.
type Cluster struct {
	// Config and Kubeconfig are an administrator's.
	Config     *rest.Config
	Kubeconfig []byte
	Nodes      []*kubenode.Node
	o          Options
	cp         *controlplane.ControlPlane
	procs      []*exec.Cmd
}

// Start starts the control plane and every node. It does not wait for
// the nodes to be Ready: WaitReady does.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	c := &Cluster{o: o}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	o := c.o
	if err := checkBinaries(o.Bin); err != nil {
		return err
	}
	if err := c.sweep(); err != nil {
		return fmt.Errorf("clearing what a previous run on %s left: %w", o.Dir, err)
	}
	if err := o.Network.Up(len(o.Nodes)); err != nil {
		return err
	}
	pki := filepath.Join(o.Dir, "pki")
	ca, err := servingCertificates(pki, o.Network.HostIP(), o.ServiceCIDR.Addr().Next())
	if err != nil {
		return err
	}
	apiLog, err := process.OpenLog(c.logPath("kube-apiserver"))
	if err != nil {
		return err
	}
	defer apiLog.Close() // the API server has its own copy of the descriptor
	c.cp, err = controlplane.Start(controlplane.Options{
		Log:       apiLog,
		AssetsDir: o.Bin, CRDDirs: o.CRDDirs, EtcdDataDir: filepath.Join(o.Dir, "etcd"), CertDir: pki, ServingCA: ca,
		APIServerFlags: map[string]string{
			"bind-address": "0.0.0.0", "advertise-address": o.Network.HostIP().String(),
			"service-cluster-ip-range": o.ServiceCIDR.String(),
			"authorization-mode":       "Node,RBAC",
			// envtest turns the ServiceAccount admission off; a real
			// cluster has it, and the controller manager makes the accounts.
			"disable-admission-plugins": "",
			"enable-admission-plugins":  "NodeRestriction",
			// Node names resolve nowhere; the API server reaches kubelets
			// (logs, exec) at their addresses.
			"kubelet-preferred-address-types": "InternalIP",
		},
	})
	if err != nil {
		return err
	}
	c.Config = c.cp.Config
	if c.Kubeconfig, err = c.cp.Kubeconfig(); err != nil {
		return err
	}
	if err := writeFile(c.KubeconfigPath(), c.Kubeconfig); err != nil {
		return err
	}
	if err := c.startControllers(); err != nil {
		return err
	}
	if err := c.startRegistry(ctx); err != nil {
		return err
	}
	return c.startNodes(ctx)
}

// startControllers runs kube-controller-manager and kube-scheduler on
// the host, each as the user the default RBAC policy grants its rights.
func (c *Cluster) startControllers() error {
	kcm, err := c.userKubeconfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	sched, err := c.userKubeconfig("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	pki := c.cp.CertDir()
	if err := c.run("kube-controller-manager", "--kubeconfig", kcm, "--authentication-kubeconfig", kcm, "--authorization-kubeconfig", kcm,
		"--leader-elect=false", "--use-service-account-credentials",
		"--root-ca-file", filepath.Join(pki, "serving-ca.crt"),
		"--service-account-private-key-file", filepath.Join(pki, "sa-signer.key"),
		"--cluster-cidr", c.o.Network.PodPrefix.String(), "--service-cluster-ip-range", c.o.ServiceCIDR.String(),
		"--node-monitor-grace-period", "20s", "--bind-address", "127.0.0.1", "--secure-port", "0"); err != nil {
		return err
	}
	return c.run("kube-scheduler", "--kubeconfig", sched, "--authentication-kubeconfig", sched, "--authorization-kubeconfig", sched,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0")
}

// startNodes starts every node, each with its kubelet's and kube-proxy's
// credentials, pointed at the host's address on the nodes' network.
func (c *Cluster) startNodes(ctx context.Context) error {
	for i, name := range c.o.Nodes {
		kubelet, err := c.nodeKubeconfig("system:node:"+name, "system:nodes")
		if err != nil {
			return err
		}
		proxy, err := c.nodeKubeconfig("system:kube-proxy", "")
		if err != nil {
			return err
		}
		o := c.nodeOptions(i, name)
		o.Kubeconfig, o.ProxyKubeconfig = kubelet, proxy
		n := kubenode.New(o)
		c.Nodes = append(c.Nodes, n)
		if err := n.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// nodeOptions are node i's options but for its credentials and images.
func (c *Cluster) nodeOptions(i int, name string) kubenode.Options {
	return kubenode.Options{
		Name: name, Index: i, Nodes: len(c.o.Nodes), Network: c.o.Network,
		Dir: filepath.Join(c.o.Dir, "nodes", name), Bin: c.o.Bin,
		PauseImage: c.o.PauseImage, Registry: c.Registry(), RegistryNames: []string{RegistryName}, ServiceCIDR: c.o.ServiceCIDR, Disks: c.o.Disks,
		BtrfsMounts: c.o.BtrfsMounts[name], Labels: c.o.Labels[name],
	}
}

// HostIP is the host's address on the nodes' network: a server the
// cluster's pods reach listens there.
func (c *Cluster) HostIP() netip.Addr { return c.o.Network.HostIP() }

// KubeconfigPath is the administrator's kubeconfig file.
func (c *Cluster) KubeconfigPath() string { return filepath.Join(c.o.Dir, "kubeconfig") }

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// WaitReady waits until every node is Ready.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	var missing []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		missing = c.notReady(ctx, cl)
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes %v not Ready after %s (kubelet logs: %s)", missing, timeout, filepath.Join(c.o.Dir, "nodes", "NODE", "logs"))
	}
	return nil
}

func (c *Cluster) notReady(ctx context.Context, cl client.Client) []string {
	var missing []string
	for _, name := range c.o.Nodes {
		node := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, node); err != nil || !ready(node) {
			missing = append(missing, name)
		}
	}
	return missing
}

func ready(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Stop stops the nodes, the controllers and the control plane; the state
// under Dir stays.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Remove())
	}
	for _, p := range c.procs {
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		_ = p.Wait()
	}
	if c.cp != nil {
		errs = append(errs, c.cp.Stop())
	}
	errs = append(errs, c.o.Network.Down())
	return errors.Join(errs...)
}

// run starts a control-plane process on the host, with its output in
// logs/NAME.log.
func (c *Cluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.o.Bin, name), args...)
	if err := process.Start(cmd, c.logPath(name)); err != nil {
		return err
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// logPath is the log file of a control-plane process.
func (c *Cluster) logPath(name string) string { return filepath.Join(c.o.Dir, "logs", name+".log") }

// userKubeconfig writes a kubeconfig for a user and returns its path.
func (c *Cluster) userKubeconfig(file, user string) (string, error) {
	data, err := c.kubeconfigFor(user, "", false)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.o.Dir, "kubeconfigs", file)
	return path, writeFile(path, data)
}

// nodeKubeconfig is a kubeconfig for a user on a node, which reaches the
// API server at the host's address on the nodes' network.
func (c *Cluster) nodeKubeconfig(user, group string) ([]byte, error) {
	return c.kubeconfigFor(user, group, true)
}

func (c *Cluster) kubeconfigFor(user, group string, fromNodes bool) ([]byte, error) {
	var groups []string
	if group != "" {
		groups = []string{group}
	}
	data, err := c.cp.KubeconfigFor(user, groups...)
	if err != nil || !fromNodes {
		return data, err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			return nil, err
		}
		u.Host = net.JoinHostPort(c.o.Network.HostIP().String(), u.Port())
		cl.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}

// checkBinaries says which binary is missing and how to build it.
func checkBinaries(bin string) error {
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return fmt.Errorf("%s is missing from %s: run hack/control-plane.sh nodes", name, bin)
		}
	}
	for _, tool := range []string{"containerd", "runc", "ctr", "nsenter", "ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: run hack/packages.sh", tool)
		}
	}
	return nil
}
