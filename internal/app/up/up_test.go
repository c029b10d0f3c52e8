package up_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	"github.com/strata-gitops/strata/internal/app/up"
	"github.com/strata-gitops/strata/internal/local/kubenode"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// TestUpRunsTheHomelab runs what `make up` runs, on its own bridge and
// ranges: both nodes are Ready, every claim of the example repository is
// Bound, the static volumes' pods run on their volumes' nodes, the
// example app reads its files back after a restart, the ledger runs
// protected by its Failover, a push through the
// work tree lands, stopping leaves no mount or loop device behind, and a
// second run on the same state finds the app's files again.
func TestUpRunsTheHomelab(t *testing.T) {
	testenv.NeedRoot(t, "the local cluster's nodes")
	if missing := testenv.LocalClusterMissing(); missing != "" {
		testenv.Unavailable(t, missing)
	}
	o := up.Defaults(testenv.RepoRoot())
	o.StateDir = t.TempDir()
	o.Cluster.Nodes = []string{"up-a", "up-b"}
	o.Cluster.Network = kubenode.Network{Bridge: "strata-u0", Prefix: netip.MustParsePrefix("10.80.0.0/24"),
		PodPrefix: netip.MustParsePrefix("10.247.0.0/16")}
	o.Cluster.ServiceCIDR = netip.MustParsePrefix("10.99.0.0/16")
	o.DashboardPort = 0

	run := startUp(t, o)
	c := kubeClient(t, run.kubeconfig)
	ctx := context.Background()
	claims := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, claims); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) < 7 {
		t.Errorf("%d claims, want the example repository's 7", len(claims.Items))
	}
	for _, pvc := range claims.Items {
		if pvc.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim %s/%s is %s once up says everything runs", pvc.Namespace, pvc.Name, pvc.Status.Phase)
		}
	}
	for app, node := range map[string]string{"notes": "up-a", "wiki": "up-b", "example-app": "up-b", "ledger": "up-a"} {
		if pod := runningPod(t, c, app); pod.Spec.NodeName != node {
			t.Errorf("%s runs on %s, want %s, its volume's node", app, pod.Spec.NodeName, node)
		}
	}
	waitProtected(t, c, "ledger")
	checkDashboard(t, run)
	// apps/notes-credentials.yaml is kept in Git encrypted with SOPS; the
	// apps Kustomization applied it decrypted with strata up's age key.
	creds := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "notes-credentials"}, creds); err != nil {
		t.Fatal(err)
	}
	if string(creds.Data["password"]) != "kept-in-git-encrypted" {
		t.Errorf("the SOPS-encrypted Secret holds %q, want its decrypted value", creds.Data["password"])
	}
	checkOtherSources(t, c)
	checkNoPlaintext(t, run, "kept-in-git-encrypted")
	first, err := appOutput(t, c, run)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, "/fast: written by") || !strings.Contains(first, "/shared: written by") {
		t.Fatalf("the example app did not write both its volumes:\n%s", first)
	}
	if err := c.Delete(ctx, runningPod(t, c, "example-app")); err != nil {
		t.Fatal(err)
	}
	waitAppReads(t, c, run, first, "the restarted app")

	push(t, filepath.Join(o.StateDir, "work", "homelab"), "apps/app.yaml", "hello from git", "hello from a push")
	testenv.Eventually(t, time.Minute, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "app-settings"}, cm); err != nil {
			return err
		}
		if cm.Data["greeting"] != "hello from a push" {
			return fmt.Errorf("greeting is %q", cm.Data["greeting"])
		}
		return nil
	})

	run.stop(t)
	if out, _ := exec.Command("losetup", "--list", "--noheadings", "--output", "BACK-FILE").Output(); strings.Contains(string(out), o.StateDir) {
		t.Errorf("loop devices left attached after stopping:\n%s", out)
	}
	if data, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(data), o.StateDir) {
		t.Errorf("mounts left under %s after stopping", o.StateDir)
	}

	again := startUp(t, o)
	c = kubeClient(t, again.kubeconfig)
	waitAppReads(t, c, again, first, "after up started again the app")
	again.stop(t)
}

// checkDashboard reads every view of the dashboard at the address up
// printed, forwarded to the controller: the two nodes with their pools,
// the ledger pair's data age, the Buildbarn installation, the
// Kustomization graph.
func checkDashboard(t *testing.T, run *upRun) {
	t.Helper()
	out := run.out.String()
	i := strings.Index(out, "the Kustomization graph):\n")
	if i < 0 {
		t.Fatalf("strata up printed no dashboard address:\n%s", out)
	}
	base := strings.TrimSpace(strings.SplitN(out[i:], "\n", 3)[1])
	views := map[string][]string{
		"": {`data-node="up-a"`, `data-node="up-b"`, `data-class="`, "thin pool"},
		// The pair synced: its data age is shown against the Failover's maxDataAge.
		"failovers": {`data-failover="apps/ledger"`, `data-pair="apps/ledger"`, "s of "},
		"buildbarn": {`data-installation="buildbarn"`, `data-component="BuildbarnStorage/storage"`, `data-shard="storage-0"`},
		"gitops":    {`data-ks="flux-system/apps"`, `data-ks="flux-system/buildbarn"`, `<line class="edge`},
		// What the ledger's claim uses, as its node's kubelet measured it.
		"volumes": {`data-claim="apps/`, `data-claim="buildbarn/`, `data-used="`, " (", " %)</td>"},
	}
	for view, wants := range views {
		testenv.Eventually(t, time.Minute, func() error {
			resp, err := http.Get(base + view)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			for _, want := range wants {
				if !strings.Contains(string(body), want) {
					return fmt.Errorf("the dashboard's %q view lacks %s:\n%s", "/"+view, want, body)
				}
			}
			return nil
		})
	}
}

// waitProtected waits for the app's Failover to protect it: its pair
// set up on both nodes and the primary's agent renewing its Lease.
func waitProtected(t *testing.T, c client.Client, app string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		fo := &failoverv1alpha1.Failover{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: app}, fo); err != nil {
			return err
		}
		if ready := apimeta.FindStatusCondition(fo.Status.Conditions, "Ready"); fo.Status.Phase != failoverv1alpha1.PhaseProtected || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("Failover apps/%s is %q: %v", app, fo.Status.Phase, fo.Status.Conditions)
		}
		return nil
	})
}

// upRun is one run of strata up.
type upRun struct {
	// kubeconfig is the cluster administrator's.
	kubeconfig string
	out        *syncBuffer
	cancel     func()
	done       chan error
	stopped    bool
}

// startUp runs strata up until it says everything runs.
func startUp(t *testing.T, o up.Options) *upRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &upRun{kubeconfig: filepath.Join(o.StateDir, "cluster", "kubeconfig"), out: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	o.Out = r.out
	go func() { r.done <- up.Run(ctx, o) }()
	t.Cleanup(func() { r.stop(t) })
	testenv.Eventually(t, 15*time.Minute, func() error {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("strata up ended early: %v\n%s", err, r.out)
		default:
		}
		if !strings.Contains(r.out.String(), "Use the cluster with:") {
			return fmt.Errorf("not running yet:\n%s", r.out)
		}
		return nil
	})
	t.Logf("strata up:\n%s", r.out)
	r.checkPrintedApp(t)
	return r
}

// stop ends the run as Ctrl-C does.
func (r *upRun) stop(t *testing.T) {
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("strata up ended with %v\n%s", err, r.out)
		}
	case <-time.After(2 * time.Minute):
		t.Errorf("strata up did not stop within two minutes of Ctrl-C\n%s", r.out)
	}
}

// runningPod is the running, ready pod of an app in namespace apps.
func runningPod(t *testing.T, c client.Client, app string) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	testenv.Eventually(t, 3*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := c.List(context.Background(), pods, client.InNamespace("apps"), client.MatchingLabels{"app": app}); err != nil {
			return err
		}
		for i, p := range pods.Items {
			if p.DeletionTimestamp == nil && podutils.IsPodReady(&p) {
				found = &pods.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no ready pod of %s among %d", app, len(pods.Items))
	})
	return found
}

// checkPrintedApp checks that up printed what the example app read from
// both its volumes: up says everything runs only once the app's pods of
// this run serve their logs.
func (r *upRun) checkPrintedApp(t *testing.T) {
	t.Helper()
	out := r.out.String()
	printed := out[strings.Index(out, "The example app's volumes hold:"):strings.Index(out, "Use the cluster with:")]
	if !strings.Contains(printed, "/fast: written by") || !strings.Contains(printed, "/shared: written by") || strings.Contains(printed, "(kubectl") {
		t.Errorf("up did not print what the example app read from its two volumes:\n%s", printed)
	}
}

// waitAppReads waits until the example app's running pod logs what the
// first pod wrote.
func waitAppReads(t *testing.T, c client.Client, r *upRun, first, who string) {
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, func() error {
		out, err := appOutput(t, c, r)
		if err != nil {
			return err
		}
		if out != first {
			return fmt.Errorf("%s reads %q, the first pod wrote %q", who, out, first)
		}
		return nil
	})
}

// appOutput is what the example app's running pod read from its volumes:
// the lines it logged at start.
func appOutput(t *testing.T, c client.Client, r *upRun) (string, error) {
	t.Helper()
	pod := runningPod(t, c, "example-app")
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "k8s", "kubectl"), "--kubeconfig", r.kubeconfig,
		"-n", "apps", "logs", pod.Name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("logs of %s: %w: %s", pod.Name, err, out)
	}
	return strings.TrimSpace(string(out)), nil
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
