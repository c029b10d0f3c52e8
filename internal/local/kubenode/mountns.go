package kubenode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/mountinfo"
)

// Each node has its own mount namespace, as a machine has: the host's
// mounts propagate into it, its own never leave it. In it, the node's
// state directories stand at the paths a kubelet and strata's chart
// expect (/var/lib/kubelet, /var/lib/strata, /var/log/pods, /etc/lvm), and every
// mount is shared within the node, so that a CSI plugin's Bidirectional
// mounts reach the kubelet. The namespace is kept by a bind mount of its
// file under the node's directory; a power loss (Stop) releases it, and
// every mount the node made goes with it.

// nodePaths are the directories each node has of its own, by the path
// they stand at inside the node.
var nodePaths = map[string]string{
	"/var/lib/kubelet": "kubelet/root",
	"/var/lib/strata":  "strata",
	"/var/log/pods":    "pod-logs",
	DiskDir:            "dev",
	lvmConfigDir:       "lvm",
}

// lvmConfigDir is lvm2's configuration directory, the node's own
// (writeLVMConfig).
const lvmConfigDir = "/etc/lvm"

// HostPath is where a path inside the node, under one of the node's own
// directories, is on the host; ok is false for a path the node shares
// with the host.
func (n *Node) HostPath(inside string) (path string, ok bool) {
	for dir, own := range nodePaths {
		if inside == dir || strings.HasPrefix(inside, dir+"/") {
			return n.path(own, strings.TrimPrefix(inside, dir)), true
		}
	}
	return inside, false
}

// Command runs a program in the node's mount namespace, where the node's
// own mounts (its btrfs disks, its volumes) are seen, as on the node's
// console.
func (n *Node) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--mount=" + n.mountNamespace(), "--", name}, args...)...)
}

// mountNamespace is the file the node's mount namespace is kept by.
func (n *Node) mountNamespace() string { return n.path("ns", "mnt") }

// makeMountNamespace makes the node's mount namespace, with its paths
// bound in and everything shared within it.
func (n *Node) makeMountNamespace() error {
	nsDir := filepath.Dir(n.mountNamespace())
	if err := privateDir(nsDir); err != nil {
		return err
	}
	if err := os.WriteFile(n.mountNamespace(), nil, 0o600); err != nil {
		return err
	}
	var script []string
	for inside, own := range nodePaths {
		if err := os.MkdirAll(inside, 0o755); err != nil { // the mount point, on the host
			return err
		}
		if err := os.MkdirAll(n.path(own), 0o755); err != nil {
			return err
		}
		script = append(script, fmt.Sprintf("mount --bind %q %q", n.path(own), inside))
	}
	script = append(script, "mount --make-rshared /")
	cmd := exec.Command("unshare", "--mount="+n.mountNamespace(), "--propagation", "slave", "sh", "-ec", strings.Join(script, "\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node %s: making its mount namespace: %v: %s", n.o.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// releaseMountNamespace lets the node's mount namespace go once its last
// process has, and with it every mount made in it.
func (n *Node) releaseMountNamespace() error {
	err := unix.Unmount(n.mountNamespace(), unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("node %s: releasing its mount namespace: %w", n.o.Name, err)
	}
	return nil
}

// privateDir makes dir a mount of its own with private propagation: a
// namespace file can be bound only where the bind would not propagate.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !isMountPoint(dir) {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making %s private: %w", dir, err)
	}
	return nil
}

func isMountPoint(dir string) bool {
	mounts, err := mountinfo.Read()
	if err != nil {
		return false
	}
	for _, m := range mounts {
		if m.MountPoint == dir {
			return true
		}
	}
	return false
}
