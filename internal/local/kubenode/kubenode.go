// Package kubenode runs one Kubernetes node on this machine: a network
// namespace linked to a host bridge, a containerd with runc and CNI, a
// kubelet and a kube-proxy, all in the node's network namespace but the
// host's mount namespace, and all in the node's own cgroups, so that the
// node can be stopped as by a power loss, frozen, cut off and brought back
// while the other nodes run. docs/development.md, "The local cluster",
// draws it.
package kubenode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/strata-gitops/strata/internal/local/process"
	"github.com/strata-gitops/strata/internal/mountinfo"
)

// Options describe one node.
type Options struct {
	// Name is the node's name and its network namespace's.
	Name string
	// Index is the node's place on the network: its address and pod range.
	Index int
	// Nodes is how many nodes there are, for the routes to their pods.
	Nodes   int
	Network Network
	// Dir holds all the node's state: containerd's, the kubelet's, logs.
	Dir string
	// Bin holds kubelet and kube-proxy (hack/control-plane.sh nodes).
	Bin string
	// Kubeconfig and ProxyKubeconfig are the kubelet's and kube-proxy's
	// credentials, with the API server at the host's address.
	Kubeconfig, ProxyKubeconfig []byte
	// Registry is the OCI registry the node pulls from, HOST:PORT, over
	// plain HTTP: the cluster's own, on the nodes' private network.
	// RegistryNames are other names of it, such as strata.local: an
	// image named under one is pulled from Registry.
	Registry      string
	RegistryNames []string
	// PauseImage is the pods' sandbox image, pulled from Registry.
	PauseImage string
	// ServiceCIDR is the cluster's Service range, for kube-proxy.
	ServiceCIDR netip.Prefix
	// Disks are the sizes of the node's disks, DiskPath(1) on.
	Disks []int64
	// BtrfsMounts mount disks, formatted btrfs if blank, at paths inside
	// the node: disk number (from 1) by path, e.g. a btrfs storage host's
	// base.
	BtrfsMounts map[string]int
	// Labels are the node's own labels, registered by its kubelet.
	Labels map[string]string
}

// Node is a node that can be started, stopped hard, frozen and cut off.
type Node struct {
	o     Options
	procs []*exec.Cmd
}

// New prepares a node; nothing runs until Start.
func New(o Options) *Node { return &Node{o: o} }

// Name is the node's name.
func (n *Node) Name() string { return n.o.Name }

// IP is the node's address.
func (n *Node) IP() netip.Addr { return n.o.Network.NodeIP(n.o.Index) }

// Start brings the node up, or back after Stop: network, cgroups,
// containerd (with the images imported), kubelet and kube-proxy.
func (n *Node) Start(ctx context.Context) error {
	// A socket's path has room for 107 bytes, and containerd adds .ttrpc.
	if sock := n.socket() + ".ttrpc"; len(sock) > 107 {
		return fmt.Errorf("node %s: its runtime's socket %s is longer than a socket path may be (107 bytes): use a shorter state directory", n.o.Name, sock)
	}
	if err := n.o.Network.plug(n.o.Name, n.o.Index, n.o.Nodes); err != nil {
		return err
	}
	if err := makeCgroups(n.o.Name); err != nil {
		return err
	}
	if err := n.attachDisks(); err != nil {
		return err
	}
	if err := n.makeMountNamespace(); err != nil {
		return err
	}
	if err := n.mountBtrfs(); err != nil {
		return err
	}
	if err := n.writeConfig(); err != nil {
		return err
	}
	if err := n.run("containerd", "containerd", "--config", n.path("containerd.toml")); err != nil {
		return err
	}
	if err := n.waitRuntime(ctx); err != nil {
		return err
	}
	if err := n.run("kubelet", filepath.Join(n.o.Bin, "kubelet"), n.kubeletArgs()...); err != nil {
		return err
	}
	return n.run("kube-proxy", filepath.Join(n.o.Bin, "kube-proxy"), "--config", n.path("kube-proxy.yaml"))
}

// Stop ends every process of the node at once, containers included, as a
// power loss would: frozen first, so that none sees the others go.
func (n *Node) Stop() error {
	if _, err := os.Stat(filepath.Join(freezerRoot, n.o.Name)); errors.Is(err, fs.ErrNotExist) {
		return n.releaseMountNamespace() // no cgroup: nothing of the node runs
	}
	// A node that will not freeze whole is killed all the same: a task
	// stuck in an uninterruptible sleep takes its SIGKILL when it wakes,
	// and waitEmpty kills whatever the others start meanwhile.
	frozen := n.Freeze()
	if err := n.killAll(); err != nil {
		return err
	}
	if err := n.Thaw(); err != nil {
		return errors.Join(frozen, err)
	}
	for _, p := range n.procs {
		_ = p.Wait()
	}
	n.procs = nil
	if err := n.waitEmpty(); err != nil {
		return errors.Join(frozen, err)
	}
	return n.releaseMountNamespace()
}

// killAll sends SIGKILL to every process of the node.
func (n *Node) killAll() error {
	pids, err := cgroupTasks(n.o.Name)
	kill(pids)
	return err
}

func kill(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Processes are the pids of every process of the node: its kubelet,
// runtime and containers.
func (n *Node) Processes() ([]int, error) { return cgroupTasks(n.o.Name) }

// Freeze stops every process of the node where it is, as a hung machine.
func (n *Node) Freeze() error { return setFreezer(n.o.Name, "FROZEN") }

// Thaw lets a frozen node run again.
func (n *Node) Thaw() error { return setFreezer(n.o.Name, "THAWED") }

// Cut takes the node off the network while its processes run on.
func (n *Node) Cut() error { return cut(n.o.Name) }

// Mend puts a cut node back on the network.
func (n *Node) Mend() error { return mend(n.o.Name) }

// Slow limits what reaches the node over the network to mbit megabits a
// second; Slow(0) lifts the limit.
func (n *Node) Slow(mbit int) error { return slow(n.o.Name, mbit) }

// Leftover says whether the node has cgroups or a network namespace on
// this machine: a node of a run that ended without removing it.
func (n *Node) Leftover() bool {
	for _, path := range []string{filepath.Join(freezerRoot, n.o.Name), "/run/netns/" + n.o.Name} {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// Remove stops the node and removes its network namespace and cgroups;
// its state directory stays for a later start.
func (n *Node) Remove() error {
	err := n.Stop()
	return errors.Join(err, unmountUnder(n.o.Dir), n.detachDisks(), removeCgroups(n.o.Name), unplug(n.o.Name))
}

// unmountUnder unmounts everything mounted under dir, deepest first.
func unmountUnder(dir string) error {
	mounts, err := mountinfo.Read()
	if err != nil {
		return err
	}
	var paths []string
	for _, m := range mounts {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			paths = append(paths, m.MountPoint)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(paths)))
	var errs []error
	for _, p := range paths {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Logs is the tail of each of the node's logs, for a failed test.
func (n *Node) Logs(lines int) string {
	var b strings.Builder
	for _, name := range []string{"containerd", "kubelet", "kube-proxy"} {
		out, _ := exec.Command("tail", "-n", strconv.Itoa(lines), n.path("logs", name+".log")).CombinedOutput()
		fmt.Fprintf(&b, "--- %s %s:\n%s", n.o.Name, name, out)
	}
	return b.String()
}

// run starts a process of the node: in the node's cgroups, network and
// mount namespaces, with its output in logs/NAME.log.
func (n *Node) run(name, bin string, args ...string) error {
	// The shell joins the cgroups first, so that every child the process
	// forks (runtime shims, containers) is in them too.
	script := fmt.Sprintf(`for f in %s; do echo $$ > "$f"; done; exec "$@"`, strings.Join(cgroupProcsFiles(n.o.Name, "system"), " "))
	cmd := exec.Command("sh", append([]string{"-c", script, "sh", "nsenter", "--net=/run/netns/" + n.o.Name, "--mount=" + n.mountNamespace(), "--", bin}, args...)...)
	if err := process.Start(cmd, n.path("logs", name+".log")); err != nil {
		return fmt.Errorf("node %s: %w", n.o.Name, err)
	}
	n.procs = append(n.procs, cmd)
	return nil
}

// waitRuntime waits until containerd answers.
func (n *Node) waitRuntime(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if last = n.ctr("version"); last != nil {
			return false, nil
		}
		last = n.criReady(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("containerd of node %s did not answer (log: %s): %w", n.o.Name, n.path("logs", "containerd.log"), last)
	}
	return nil
}

// criReady asks containerd's CRI service for its status, as the kubelet
// does when it starts: containerd answers ctr before the CRI service has
// restored its state, and a kubelet started in between exits ("server is
// not initialized yet"), which a restarted node with containers met.
func (n *Node) criReady(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+n.socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("CRI status of node %s: %w", n.o.Name, err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady && !c.GetStatus() {
			return fmt.Errorf("CRI runtime of node %s not ready: %s", n.o.Name, c.GetMessage())
		}
	}
	return nil
}

// waitEmpty waits until no process of the node is left.
func (n *Node) waitEmpty() error {
	var pids []int
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		pids, err = cgroupTasks(n.o.Name)
		kill(pids) // what a dying process started meanwhile
		return len(pids) == 0, err
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("node %s: processes %v outlived SIGKILL", n.o.Name, pids)
	}
	return err
}

// ctr runs containerd's client against the node's runtime, in the
// namespace the CRI plugin keeps Kubernetes' images in.
func (n *Node) ctr(args ...string) error {
	full := append([]string{"--address", n.socket(), "--namespace", "k8s.io"}, args...)
	if out, err := exec.Command("ctr", full...).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s on node %s: %v: %s", strings.Join(args, " "), n.o.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n *Node) socket() string { return n.path("run", "containerd", "containerd.sock") }

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.o.Dir}, elem...)...)
}
