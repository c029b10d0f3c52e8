package up_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/app/up"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// TestUpAppliesTheRepositoryAndAPush runs what `make up` runs: everything
// in the example repository becomes Ready, the btrfs storage host serves
// the example's StorageClass, a push through the work tree lands, and
// stopping leaves no loop device or mount behind.
func TestUpAppliesTheRepositoryAndAPush(t *testing.T) {
	testenv.NeedRoot(t, "loop-device disks")
	testenv.NeedTools(t, "git", "lvm", "mkfs.btrfs", "ganesha.nfsd")
	if _, err := os.Stat(filepath.Join(testenv.AssetsDir(), "kube-apiserver")); err != nil {
		testenv.Unavailable(t, "control-plane binaries not found: run hack/control-plane.sh (make test does)")
	}
	root := testenv.RepoRoot()
	state := t.TempDir()
	out := &syncBuffer{}
	o := up.Options{StateDir: state, ClusterDir: filepath.Join(root, "clusters", "homelab"),
		CRDDir: filepath.Join(root, "charts", "strata", "crds"), AssetsDir: testenv.AssetsDir(),
		GitAddr: testenv.FreeAddr(t), HookAddr: testenv.FreeAddr(t), VolumeAPIAddr: testenv.FreeAddr(t), NFSAddr: testenv.FreeAddr(t), Out: out}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Run(ctx, o) }()
	stopped := false
	stopUp := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("strata up ended with %v\n%s", err, out)
			}
		case <-time.After(time.Minute):
			t.Errorf("strata up did not stop within a minute of Ctrl-C\n%s", out)
		}
	}
	t.Cleanup(stopUp)

	testenv.Eventually(t, 4*time.Minute, func() error {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("strata up ended early: %v\n%s", err, out)
		default:
		}
		if !strings.Contains(out.String(), "Kustomizations are Ready") {
			return fmt.Errorf("not all Ready yet:\n%s", out)
		}
		return nil
	})

	c := kubeClient(t, filepath.Join(state, "kubeconfig"))
	sc := &storagev1.StorageClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: "strata-btrfs"}, sc); err != nil {
		t.Fatal(err)
	}
	if want := "http://" + o.VolumeAPIAddr; sc.Parameters["agentURL"] != want {
		t.Errorf("StorageClass strata-btrfs has agentURL %q, want the local storage host's %s", sc.Parameters["agentURL"], want)
	}
	token, err := os.ReadFile(filepath.Join(state, "btrfs-token"))
	if err != nil {
		t.Fatal(err)
	}
	agent := &volumeapi.Client{URL: sc.Parameters["agentURL"], Token: strings.TrimSpace(string(token))}
	if _, err := agent.Stats(ctx); err != nil {
		t.Errorf("the btrfs storage host does not answer with its tenant's token: %v", err)
	}

	push(t, filepath.Join(state, "work", "homelab"), "apps/app.yaml", "hello from git", "hello from a push")
	testenv.Eventually(t, 30*time.Second, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "databases", Name: "app-settings"}, cm); err != nil {
			return err
		}
		if cm.Data["greeting"] != "hello from a push" {
			return fmt.Errorf("greeting is %q", cm.Data["greeting"])
		}
		return nil
	})

	stopUp()
	if out, _ := exec.Command("losetup", "--list", "--noheadings", "--output", "BACK-FILE").Output(); strings.Contains(string(out), state) {
		t.Errorf("loop devices left attached after stopping:\n%s", out)
	}
	if data, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(data), state) {
		t.Errorf("mounts left under %s after stopping", state)
	}
}

// push edits a file of the work tree and pushes the change, as the
// printed next steps tell a user to.
func push(t *testing.T, work, file, old, replacement string) {
	t.Helper()
	path := filepath.Join(work, file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(replacement), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"commit", "-qam", "a change from the test"}, {"push", "-q"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
}

func kubeClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// syncBuffer is what strata up prints, read while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
