package nfs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/storage/nfs"
)

// After NFS-Ganesha died its pid may belong to any process. The agent
// must never signal that process, and it signals only when the exports
// changed, not on every periodic sync.
func TestGaneshaSignalsOnlyGaneshaAndOnlyOnAChange(t *testing.T) {
	stranger := exec.Command("sleep", "600")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- stranger.Wait() }()
	t.Cleanup(func() { _ = stranger.Process.Kill() })

	dir := t.TempDir()
	g := &nfs.Ganesha{ExportsFile: filepath.Join(dir, "exports.conf"), PIDFile: filepath.Join(dir, "ganesha.pid")}
	if err := os.WriteFile(g.PIDFile, []byte(strconv.Itoa(stranger.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := g.Sync(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "not signalling") || !strings.Contains(err.Error(), g.PIDFile) {
		t.Fatalf("Sync with a pid file naming sleep = %v, want a refusal naming the pid file", err)
	}
	if err := g.Sync(context.Background(), nil); err != nil {
		t.Fatalf("a Sync that changes nothing = %v, want nothing done", err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the process the stale pid file names was signalled: %v", err)
	case <-time.After(100 * time.Millisecond): // a signal, had one been sent, is delivered by now
	}
}
