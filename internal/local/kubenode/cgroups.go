package kubenode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// A node's processes live in cgroup /NAME of every v1 hierarchy: its own
// (containerd, kubelet, kube-proxy, the runtime's shims) in /NAME/system,
// its pods in /NAME/kubepods, which the kubelet makes (its cgroupRoot is
// /NAME). The freezer hierarchy's /NAME is how the node is frozen, and how
// every process of it is found for a hard stop.

const freezerRoot = "/sys/fs/cgroup/freezer"

// hierarchies are the mount points of this machine's cgroup v1
// hierarchies.
func hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 2 && fields[2] == "cgroup" {
			out = append(out, fields[1])
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup v1 hierarchy is mounted under /sys/fs/cgroup: the local cluster's kubelet needs them")
	}
	return out, s.Err()
}

// makeCgroups makes /NAME and /NAME/system in every hierarchy. A cpuset
// cgroup takes no process until it has CPUs and memory nodes, so both are
// copied from the parent.
func makeCgroups(node string) error {
	roots, err := hierarchies()
	if err != nil {
		return err
	}
	for _, root := range roots {
		for _, dir := range []string{filepath.Join(root, node), filepath.Join(root, node, "system")} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			if filepath.Base(root) == "cpuset" {
				if err := inheritCpuset(dir); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func inheritCpuset(dir string) error {
	for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
		parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), file))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, file), parent, 0o644); err != nil {
			return fmt.Errorf("cgroup %s: %s: %w", dir, file, err)
		}
	}
	return nil
}

// cgroupProcsFiles are the cgroup.procs files a process writes its pid to
// to join /NAME/SUB in every hierarchy.
func cgroupProcsFiles(node, sub string) []string {
	roots, _ := hierarchies()
	out := make([]string, 0, len(roots))
	for _, root := range roots {
		out = append(out, filepath.Join(root, node, sub, "cgroup.procs"))
	}
	return out
}

// setFreezer freezes or thaws every process of the node and waits until
// the kernel says it has. The state is written again every second while
// it waits: cgroup v1's freezer tries a task once per write, and a task
// forked or in an uninterruptible sleep at the first try stays FREEZING
// until it is asked again.
func setFreezer(node, state string) error {
	file := filepath.Join(freezerRoot, node, "freezer.state")
	var got string
	var asked time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if time.Since(asked) >= time.Second {
			if err := os.WriteFile(file, []byte(state), 0o644); err != nil {
				return false, fmt.Errorf("node %s: %s: %w", node, file, err)
			}
			asked = time.Now()
		}
		data, err := os.ReadFile(file)
		got = strings.TrimSpace(string(data))
		return got == state, err
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("node %s: the freezer is %s, not %s, after 30 s", node, got, state)
	}
	return err
}

// cgroupTasks are the pids of every process of the node.
func cgroupTasks(node string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(filepath.Join(freezerRoot, node), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil // the cgroup went away while walking
		}
		for _, line := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(line); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// removeCgroups removes the node's cgroups, deepest first, in every
// hierarchy; they must be empty.
func removeCgroups(node string) error {
	roots, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(root, node), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, dir := range dirs {
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
