package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/strata-gitops/strata/internal/local/kubenode"
)

// sweep clears what a run on the same directory left when it ended
// without stopping (killed, or the machine's power cut with the
// directory on persistent storage): its nodes' processes, mounts, disks
// and namespaces, and its control-plane processes, which would hold
// etcd's data directory. The state under Dir stays.
func (c *Cluster) sweep() error {
	var errs []error
	for i, name := range c.o.Nodes {
		if n := kubenode.New(c.nodeOptions(i, name)); n.Leftover() {
			errs = append(errs, n.Remove())
		}
	}
	return errors.Join(append(errs, killUsing(c.o.Dir))...)
}

// controlPlane are the programs a run starts on the host; the nodes'
// are found by their cgroups.
var controlPlane = map[string]bool{"etcd": true, "kube-apiserver": true, "kube-controller-manager": true, "kube-scheduler": true, "registry": true}

// killUsing kills every control-plane process whose command line names a
// path under dir, and waits until they are gone. Other programs that
// name it, such as a kubectl with its kubeconfig, are left alone.
func killUsing(dir string) error {
	pids, err := processesUsing(dir)
	if err != nil || len(pids) == 0 {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		pids, err = processesUsing(dir)
		return len(pids) == 0, err
	})
	if err != nil {
		return fmt.Errorf("processes %v of a previous run on %s outlived SIGKILL: %w", pids, dir, err)
	}
	return nil
}

func processesUsing(dir string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	needle := []byte(filepath.Clean(dir) + "/")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || !controlPlane[filepath.Base(exe)] {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), string(needle)) && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// zombie says whether pid has exited and waits for its parent to reap it.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	return !ok || strings.HasPrefix(rest, "Z")
}
