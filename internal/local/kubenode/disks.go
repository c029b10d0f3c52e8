package kubenode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/loopdev"
)

// A node's disks are sparse files under its directory, attached as loop
// devices. Every node sees the host's /dev, so each names its own disks
// by /dev/strata/disk-N, a link to its loop device in a directory bound
// into the node's mount namespace only: the same path is a different
// disk on each node, as /dev/disk/by-id paths are on real machines.
// Disks outlive a power loss (Stop); Remove detaches them and every loop
// device the node's own processes made.
//
// lvm2 scans every block device it sees, so without more each node's
// agent would find the other nodes' physical volumes too: one node would
// extend another's volume group, or two would make groups of one name.
// Each node has its own /etc/lvm (the chart gives the agent the node's),
// whose filter lets lvm2 see the node's own disks only, as on a machine.

// DiskDir is where a node's disk links are, inside the node.
const DiskDir = "/dev/strata"

// DiskPath is the path of a node's disk i (from 1), inside the node.
func DiskPath(i int) string { return fmt.Sprintf("%s/disk-%d", DiskDir, i) }

// attachDisks makes and attaches the node's disks and links each at its
// path in the node's own /dev/strata.
func (n *Node) attachDisks() error {
	links := n.path("dev")
	if err := os.MkdirAll(links, 0o755); err != nil {
		return err
	}
	devices := make([]string, 0, len(n.o.Disks))
	for i, size := range n.o.Disks {
		file := n.path("disks", fmt.Sprintf("disk-%d.img", i+1))
		if err := sparseFile(file, size); err != nil {
			return fmt.Errorf("node %s: disk %s: %w", n.o.Name, file, err)
		}
		dev, err := loopdev.Attach(file)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.o.Name, err)
		}
		link := filepath.Join(links, filepath.Base(DiskPath(i+1)))
		_ = os.Remove(link)
		if err := os.Symlink(dev, link); err != nil {
			return err
		}
		devices = append(devices, dev)
	}
	return n.writeLVMConfig(devices)
}

// writeLVMConfig writes the node's own lvm.conf, whose filter accepts
// only the node's disks: their loop devices and their /dev/strata links.
// The loop devices the loopback volume manager attaches for volumes are
// refused too, as lvm2 skips logical volumes (devices/scan_lvs).
func (n *Node) writeLVMConfig(devices []string) error {
	accept := make([]string, 0, len(devices)+2)
	for _, dev := range devices {
		accept = append(accept, fmt.Sprintf(`"a|^%s$|"`, regexp.QuoteMeta(dev)))
	}
	accept = append(accept, fmt.Sprintf(`"a|^%s/|"`, regexp.QuoteMeta(DiskDir)), `"r|.*|"`)
	conf := fmt.Sprintf("# Node %s's lvm2 configuration, written by the local cluster: lvm2 sees\n"+
		"# this node's disks only, though the node shares the host's /dev.\n"+
		"devices {\n\tglobal_filter = [ %s ]\n}\n", n.o.Name, strings.Join(accept, ", "))
	dir := n.path(nodePaths[lvmConfigDir])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "lvm.conf"), []byte(conf), 0o644)
}

// mountBtrfs mounts the node's btrfs disks inside the node only.
func (n *Node) mountBtrfs() error {
	for inside, disk := range n.o.BtrfsMounts {
		dev, err := filepath.EvalSymlinks(filepath.Join(n.path("dev"), filepath.Base(DiskPath(disk))))
		if err != nil {
			return fmt.Errorf("node %s: btrfs disk %d: %w", n.o.Name, disk, err)
		}
		if err := localdisk.FormatBtrfs(dev); err != nil {
			return fmt.Errorf("node %s: %w", n.o.Name, err)
		}
		onHost, _ := n.HostPath(inside)
		if err := os.MkdirAll(onHost, 0o755); err != nil {
			return err
		}
		cmd := n.Command("mount", dev, inside)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("node %s: mounting %s at %s: %v: %s", n.o.Name, dev, inside, err, out)
		}
	}
	return nil
}

func sparseFile(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() >= size {
		return err
	}
	return f.Truncate(size)
}

// detachDisks detaches every loop device whose backing file is under the
// node's directory: its disks, and the loopback volumes its agent made.
// Loop devices are told by the backing file's inode, not its path, as a
// path the node's agent used names a file inside the node.
func (n *Node) detachDisks() error {
	inodes := map[[2]uint64]bool{}
	_ = filepath.WalkDir(n.o.Dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			var st syscall.Stat_t
			if syscall.Stat(path, &st) == nil {
				inodes[[2]uint64{st.Dev, st.Ino}] = true
			}
		}
		return nil
	})
	devices, err := loopDevices()
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range devices {
		if inodes[[2]uint64{d.dev, d.ino}] {
			if out, err := exec.Command("losetup", "--detach", d.name).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("detaching %s: %v: %s", d.name, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

type loopDevice struct {
	name     string
	dev, ino uint64
}

// loopDevices lists the attached loop devices with their backing files'
// device and inode.
func loopDevices() ([]loopDevice, error) {
	out, err := exec.Command("losetup", "--list", "--json", "--output", "NAME,BACK-INO,BACK-MAJ:MIN").Output()
	if err != nil {
		return nil, fmt.Errorf("losetup --list: %w", err)
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return nil, nil // no loop device at all
	}
	var list struct {
		Devices []struct {
			Name   string `json:"name"`
			Inode  uint64 `json:"back-ino"`
			MajMin string `json:"back-maj:min"`
		} `json:"loopdevices"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("losetup --list: %w", err)
	}
	var devices []loopDevice
	for _, d := range list.Devices {
		major, minor, ok := strings.Cut(strings.TrimSpace(d.MajMin), ":")
		if !ok {
			continue
		}
		ma, err1 := strconv.ParseUint(major, 10, 32)
		mi, err2 := strconv.ParseUint(minor, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		devices = append(devices, loopDevice{name: d.Name, ino: d.Inode, dev: unix.Mkdev(uint32(ma), uint32(mi))})
	}
	return devices, nil
}
