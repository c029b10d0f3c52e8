package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	gcOnce sync.Once
	gcStop func()
	gcErr  error
)

// GarbageCollector runs Kubernetes' own garbage collector against the
// package's API server, once, until the package's tests end: a
// kube-controller-manager with only that controller, so owned objects go
// with their owners and orphaning deletions finish, and nothing else
// (no Deployment or StatefulSet controller) writes what tests drive.
func (e *Env) GarbageCollector(t testing.TB) {
	t.Helper()
	gcOnce.Do(func() { gcStop, gcErr = e.startGarbageCollector() })
	if gcErr != nil {
		Unavailable(t, fmt.Sprintf("starting kube-controller-manager's garbage collector: %v", gcErr))
	}
}

func (e *Env) startGarbageCollector() (func(), error) {
	bin := filepath.Join(AssetsDir(), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (hack/control-plane.sh builds it)", bin, err)
	}
	dir, err := os.MkdirTemp("", "strata-gc-")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := e.adminKubeconfig()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeconfig", path, "--controllers", "garbagecollector", "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
		_ = os.RemoveAll(dir)
	}, nil
}
