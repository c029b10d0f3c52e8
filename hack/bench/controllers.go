package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// controller is a Kustomization controller under measurement.
type controller interface {
	name() string
	// prepare starts what the controller needs besides itself and returns
	// how to stop it.
	prepare(b *bench) (func(), error)
	command(b *bench) *exec.Cmd
	// userAgent prefixes the controller's API requests in the audit log.
	userAgent() string
	servesReceiver() bool
	// finalizerPolicy says whether the controller's installation has the
	// API server add Flux's finalizer as Kustomizations are created.
	finalizerPolicy() bool
}

type strataController struct{}

func (strataController) name() string                   { return "strata" }
func (strataController) prepare(*bench) (func(), error) { return func() {}, nil }
func (strataController) userAgent() string              { return "strata/" }
func (strataController) servesReceiver() bool           { return true }

// finalizerPolicy: strata's chart installs it (docs/engine.md, "Finalizers").
func (strataController) finalizerPolicy() bool { return true }

func (strataController) command(b *bench) *exec.Cmd {
	args := []string{"controller", "--kubeconfig", b.kubeconfig,
		"--artifact-dir", filepath.Join(b.dir, "artifacts"), "--artifact-bind-address", "0",
		"--metrics-bind-address", b.metrics, "--health-probe-bind-address", "0",
		"--receiver-bind-address", b.receiver, fmt.Sprintf("--concurrent=%d", b.concurrent),
		fmt.Sprintf("--kube-api-qps=%g", b.qps), fmt.Sprintf("--kube-api-burst=%d", b.burst)}
	if b.profile != "" || b.profileFirst != "" {
		args = append(args, "--pprof-bind-address", b.pprof)
	}
	return exec.Command(b.strata, args...)
}

// fluxController is Flux's kustomize-controller with the same concurrency
// and client rate limits as strata, and Flux's shortest sensible dependency
// requeue. Flux's source-controller cannot be built here (a module it needs
// is not on the module proxy), so strata's GitRepository reconciler, alone
// on its shard, serves it the artifacts: the same tarball format and status
// fields source-controller writes.
type fluxController struct {
	binary string
	// defaults runs Flux with its default flags (4 at a time, a
	// dependency requeued after 30 s, its default client rate limits)
	// instead of the tuned ones.
	defaults bool
}

func (f fluxController) name() string {
	if f.defaults {
		return "flux (default flags)"
	}
	return "flux (tuned: --concurrent=20 --requeue-dependency=5s)"
}
func (fluxController) userAgent() string    { return "kustomize-controller/" }
func (fluxController) servesReceiver() bool { return false }

// finalizerPolicy: Flux is measured as Flux installs itself.
func (fluxController) finalizerPolicy() bool { return false }

func (f fluxController) command(b *bench) *exec.Cmd {
	args := []string{"--metrics-addr", b.metrics, "--health-addr", freeAddr(), "--enable-leader-election=false"}
	if !f.defaults {
		args = append(args, fmt.Sprintf("--concurrent=%d", b.concurrent), "--requeue-dependency=5s",
			fmt.Sprintf("--kube-api-qps=%g", b.qps), fmt.Sprintf("--kube-api-burst=%d", b.burst))
	}
	cmd := exec.Command(f.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+b.kubeconfig, "RUNTIME_NAMESPACE=flux-system")
	return cmd
}

func (fluxController) prepare(b *bench) (func(), error) {
	cmd := exec.Command(b.strata, "controller", "--kubeconfig", b.kubeconfig,
		"--watch-label-selector", shardLabel+"="+sourceShard,
		"--artifact-dir", filepath.Join(b.dir, "artifacts"), "--artifact-bind-address", freeAddr(),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--receiver-bind-address", "0")
	if err := b.startLogged(cmd, "source.log"); err != nil {
		return nil, err
	}
	stopSource := func() { stop(cmd) }
	err := poll(2*time.Minute, 100*time.Millisecond, func() error {
		repo := &sourcev1.GitRepository{}
		if err := b.c.Get(context.Background(), client.ObjectKey{Namespace: "flux-system", Name: "bench"}, repo); err != nil {
			return fmt.Errorf("reading GitRepository flux-system/bench, whose artifact Flux is served: %w", err)
		}
		if repo.Status.Artifact == nil || repo.Status.Artifact.Revision != b.lastRevision {
			return fmt.Errorf("the GitRepository has no artifact at %s after 2 minutes", b.lastRevision)
		}
		return nil
	})
	if err != nil {
		stopSource()
		return nil, err
	}
	return stopSource, nil
}

// start runs ctl's process, logging to a file in the bench directory.
func (b *bench) start(ctl controller) (*exec.Cmd, time.Time, error) {
	cmd := ctl.command(b)
	start := time.Now()
	return cmd, start, b.startLogged(cmd, ctl.name()+".log")
}

func (b *bench) startLogged(cmd *exec.Cmd, logName string) error {
	logFile, err := os.OpenFile(filepath.Join(b.dir, logName), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	return cmd.Start()
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
}
