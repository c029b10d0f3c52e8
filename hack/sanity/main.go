// Command sanity runs the CSI community's conformance suite, csi-sanity,
// against strata's CSI driver on this machine: it starts a control plane,
// a loop-device disk, the node's agent (for btrfs: a btrfs filesystem,
// NFS-Ganesha and the agent's volume API) and both CSI services, runs
// bin/csi-sanity with any arguments given after --, and cleans up.
// `make sanity BACKEND=lvm|btrfs SANITY_ARGS=...` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/rest"

	"github.com/strata-gitops/strata/internal/testing/csienv"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func main() {
	backend := flag.String("backend", "lvm", "driver backend to test: lvm or btrfs")
	agentBackend := flag.String("agent-backend", "loopback", "lvm only: the agent's volume manager, lvm2 or loopback")
	flag.Parse()
	code, err := run(*backend, *agentBackend, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sanity:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// run returns csi-sanity's exit code.
func run(backend, agentBackend string, args []string) (int, error) {
	start := map[string]func(context.Context, *rest.Config, csienv.Options) (*csienv.Env, error){
		"lvm": csienv.Start, "btrfs": csienv.StartBtrfs,
	}[backend]
	if start == nil {
		return 2, fmt.Errorf("BACKEND=%s: use lvm or btrfs", backend)
	}
	if os.Geteuid() != 0 {
		return 2, errors.New("csi-sanity mounts volumes and attaches loop devices: run as root")
	}
	sanity := filepath.Join(testenv.RepoRoot(), "bin", "csi-sanity")
	if _, err := os.Stat(sanity); err != nil {
		return 2, fmt.Errorf("%s is missing: run hack/tools.sh csi-sanity (make sanity does)", sanity)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("► starting kube-apiserver and etcd")
	cp, err := testenv.StartAPIServer(nil)
	if err != nil {
		return 2, err
	}
	defer cp.Stop() //nolint:errcheck // best effort on the way out
	dir, err := os.MkdirTemp("", "strata-sanity-")
	if err != nil {
		return 2, err
	}
	defer os.RemoveAll(dir)
	o := csienv.Defaults(dir)
	o.Backend = agentBackend
	if backend == "btrfs" {
		o.Class, o.DiskSize = "sanity-btrfs", 32<<30
		fmt.Printf("► starting btrfs on a loop disk, NFS-Ganesha, the agent's volume API and both CSI services under %s\n", dir)
	} else {
		fmt.Printf("► starting the agent (%s volume manager) and both CSI services under %s\n", agentBackend, dir)
	}
	env, err := start(ctx, cp.Config, o)
	if env != nil {
		defer env.Stop() //nolint:errcheck // best effort on the way out
	}
	if err != nil {
		return 2, err
	}
	fmt.Println("► running csi-sanity", args)
	cmd := exec.CommandContext(ctx, sanity, append(env.SanityArgs(), args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}
