// Command bench measures the Kustomization engine on a local control plane:
// N Kustomizations from controller start to all Ready, the controller's
// peak memory, a second no-change pass (time and writes), and push-to-applied
// latency through the Receiver. `make bench` runs it; results go to
// docs/benchmarks.md by hand, with the command.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/controlplane"
	"github.com/strata-gitops/strata/internal/gitserver"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/status"
)

type config struct {
	kustomizations, infra, concurrent, pushes int
	qps                                       float64
	burst                                     int
	strata, root                              string
}

func main() {
	var c config
	flag.IntVar(&c.kustomizations, "kustomizations", 1000, "Kustomizations in total")
	flag.IntVar(&c.infra, "infra", 10, "infrastructure Kustomizations the rest depend on")
	flag.IntVar(&c.concurrent, "concurrent", 20, "controller --concurrent")
	flag.Float64Var(&c.qps, "qps", 500, "controller --kube-api-qps")
	flag.IntVar(&c.burst, "burst", 1000, "controller --kube-api-burst")
	flag.IntVar(&c.pushes, "pushes", 20, "pushes measured through the receiver")
	flag.StringVar(&c.strata, "strata", "bin/strata", "strata binary")
	flag.StringVar(&c.root, "root", ".", "repository root (for bin/k8s and the CRDs)")
	flag.Parse()
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

type bench struct {
	config
	dir        string
	kubeconfig string
	c          client.Client
	work       string
	repoURL    string
	hookURL    atomic.Value
	receiver   string
	metrics    string

	lastRevision   string
	fetchLatencies []time.Duration
}

func run(cfg config) error {
	b := &bench{config: cfg}
	var err error
	if b.dir, err = os.MkdirTemp("", "strata-bench-"); err != nil {
		return err
	}
	if os.Getenv("STRATA_BENCH_KEEP") == "" {
		defer os.RemoveAll(b.dir)
	}
	cp, err := controlplane.Start(controlplane.Options{
		AssetsDir: filepath.Join(b.root, "bin", "k8s"), CRDDir: filepath.Join(b.root, "charts", "strata", "crds"),
		// envtest's default service range holds only ~250 Services.
		APIServerFlags: map[string]string{"service-cluster-ip-range": "10.96.0.0/12"},
	})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	kc, err := cp.Kubeconfig()
	if err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(b.dir, "kubeconfig")
	if err := os.WriteFile(b.kubeconfig, kc, 0o600); err != nil {
		return err
	}
	if b.c, err = client.New(cp.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	b.receiver, b.metrics = freeAddr(), freeAddr()
	if err := b.serveRepository(); err != nil {
		return err
	}
	rev, err := b.generate()
	if err != nil {
		return err
	}
	b.lastRevision = rev
	if err := b.createObjects(); err != nil {
		return err
	}

	fmt.Printf("strata bench: %d Kustomizations (%d infrastructure), --concurrent=%d --kube-api-qps=%g --kube-api-burst=%d\n",
		b.kustomizations, b.infra, b.concurrent, b.qps, b.burst)
	ctrl, start, err := b.startController()
	if err != nil {
		return err
	}
	if err := b.waitAllReady(rev, 10*time.Minute); err != nil {
		return err
	}
	firstPass := time.Since(start)
	peak := peakRSS(ctrl.Process.Pid)
	fmt.Printf("first pass, controller start to all Ready: %.1f s; controller peak RSS %d MiB\n", firstPass.Seconds(), peak>>20)
	stop(ctrl)

	before, err := b.revision()
	if err != nil {
		return err
	}
	ctrl, start, err = b.startController()
	if err != nil {
		return err
	}
	if err := b.waitReconciles(b.kustomizations, 5*time.Minute); err != nil {
		return err
	}
	secondPass := time.Since(start)
	after, err := b.revision()
	if err != nil {
		return err
	}
	fmt.Printf("second pass, no change, controller start to %d reconciles: %.1f s; writes: %d (etcd revision %s -> %s)\n",
		b.kustomizations, secondPass.Seconds(), revisionDelta(before, after), before, after)

	latencies, err := b.pushLatencies()
	stop(ctrl)
	if err != nil {
		return err
	}
	fmt.Printf("push to applied through the receiver, %d pushes: p50 %d ms, p90 %d ms, max %d ms (new artifact stored: p50 %d ms)\n",
		len(latencies), pct(latencies, 50).Milliseconds(), pct(latencies, 90).Milliseconds(), pct(latencies, 100).Milliseconds(),
		pct(b.fetchLatencies, 50).Milliseconds())
	return nil
}

func (b *bench) serveRepository() error {
	gitRoot := filepath.Join(b.dir, "git")
	if err := os.MkdirAll(gitRoot, 0o755); err != nil {
		return err
	}
	if err := gitserver.InitBare(filepath.Join(gitRoot, "bench.git"), "main"); err != nil {
		return err
	}
	h, err := gitserver.Handler(gitRoot, func(string) {
		if url, ok := b.hookURL.Load().(string); ok {
			if resp, err := http.Post(url, "application/json", nil); err == nil { //nolint:noctx,gosec
				resp.Body.Close()
			}
		}
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, h) }() //nolint:gosec
	b.repoURL = "http://" + ln.Addr().String() + "/bench.git"
	return nil
}

func name(i int, infra int) string {
	if i < infra {
		return fmt.Sprintf("infra-%02d", i)
	}
	return fmt.Sprintf("app-%04d", i)
}

// generate writes one directory per Kustomization: a ServiceAccount, a
// Service, a ConfigMap and a Deployment with 0 replicas.
func (b *bench) generate() (string, error) {
	b.work = filepath.Join(b.dir, "work")
	for i := 0; i < b.kustomizations; i++ {
		n := name(i, b.infra)
		if err := os.MkdirAll(filepath.Join(b.work, n), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(b.work, n, "objects.yaml"), []byte(objects(n, "0")), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"config", "user.email", "bench@strata.dev"}, {"config", "user.name", "bench"},
		{"add", "-A"}, {"commit", "-q", "-m", "generated"}, {"remote", "add", "origin", b.repoURL}, {"push", "-q", "origin", "main"},
	} {
		if err := git(b.work, args...); err != nil {
			return "", err
		}
	}
	hash, err := gitserver.Run(b.work, "rev-parse", "HEAD")
	return "main@sha1:" + hash, err
}

func objects(n, version string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
spec:
  selector: {app: %[1]s}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s
data:
  version: "%[2]s"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 0
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      serviceAccountName: %[1]s
      containers: [{name: app, image: "nginx:1.27"}]
`, n, version)
}

func (b *bench) createObjects() error {
	ctx := context.Background()
	for _, ns := range []string{"flux-system", "bench"} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := b.c.Create(ctx, &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "flux-system"},
		Spec: sourcev1.GitRepositorySpec{URL: b.repoURL, Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"}},
	}); err != nil {
		return err
	}
	for i := 0; i < b.kustomizations; i++ {
		n := name(i, b.infra)
		ks := &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "flux-system"},
			Spec: kustomizev1.KustomizationSpec{
				Interval: metav1.Duration{Duration: time.Hour}, Path: "./" + n, Prune: true, TargetNamespace: "bench",
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "bench"},
			},
		}
		if i >= b.infra {
			ks.Spec.DependsOn = []meta.DependencyReference{{Name: name(i%b.infra, b.infra)}}
		}
		if err := b.c.Create(ctx, ks); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) startController() (*exec.Cmd, time.Time, error) {
	cmd := exec.Command(b.strata, "controller", "--kubeconfig", b.kubeconfig,
		"--artifact-dir", filepath.Join(b.dir, "artifacts"), "--artifact-bind-address", "0",
		"--metrics-bind-address", b.metrics, "--health-probe-bind-address", "0",
		"--receiver-bind-address", b.receiver, fmt.Sprintf("--concurrent=%d", b.concurrent),
		fmt.Sprintf("--kube-api-qps=%g", b.qps), fmt.Sprintf("--kube-api-burst=%d", b.burst))
	logFile, err := os.Create(filepath.Join(b.dir, "controller.log"))
	if err != nil {
		return nil, time.Time{}, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	return cmd, start, cmd.Start()
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
}

func (b *bench) waitAllReady(rev string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var lagging *kustomizev1.Kustomization
	lastReady := 0
	for time.Now().Before(deadline) {
		list := &kustomizev1.KustomizationList{}
		if err := b.c.List(context.Background(), list, client.InNamespace("flux-system")); err != nil {
			return err
		}
		ready := 0
		lagging = nil
		for i := range list.Items {
			if status.IsReady(&list.Items[i]) && list.Items[i].Status.LastAppliedRevision == rev {
				ready++
			} else {
				lagging = &list.Items[i]
			}
		}
		if ready == b.kustomizations {
			return nil
		}
		lastReady = ready
		time.Sleep(time.Second)
	}
	if lagging != nil {
		return fmt.Errorf("%d of %d Kustomizations not Ready at %s within %s, e.g. %s: applied %s, conditions %+v",
			b.kustomizations-lastReady, b.kustomizations, rev, limit, lagging.Name, lagging.Status.LastAppliedRevision, lagging.Status.Conditions)
	}
	return fmt.Errorf("not all Kustomizations Ready within %s", limit)
}

// waitReconciles polls the controller's metrics until n Kustomization
// reconciles have finished.
func (b *bench) waitReconciles(n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if reconciles(b.metrics) >= n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("fewer than %d reconciles within %s", n, limit)
}

func reconciles(addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	total := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `controller_runtime_reconcile_total{controller="kustomization"`) {
			var v float64
			fields := strings.Fields(line)
			_, _ = fmt.Sscan(fields[len(fields)-1], &v)
			total += int(v)
		}
	}
	return total
}

// revision is the current etcd revision: a list served from etcd returns it
// as its resourceVersion, and any write anywhere raises it.
func (b *bench) revision() (string, error) {
	list := &corev1.NamespaceList{}
	if err := b.c.List(context.Background(), list); err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}

func revisionDelta(before, after string) int {
	var a, c int
	_, _ = fmt.Sscan(before, &a)
	_, _ = fmt.Sscan(after, &c)
	return c - a
}

func (b *bench) pushLatencies() ([]time.Duration, error) {
	if err := b.setupReceiver(); err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := 1; i <= b.pushes; i++ {
		d, err := b.measurePush(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
		// Measure each push from a settled controller: the next push waits
		// until every Kustomization has recorded this revision.
		if err := b.waitAllReady(b.lastRevision, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setupReceiver creates a generic Receiver for the source and waits until
// it answers; the git server calls it after every push.
func (b *bench) setupReceiver() error {
	ctx := context.Background()
	if err := b.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "flux-system"},
		StringData: map[string]string{"token": "bench"}}); err != nil {
		return err
	}
	rcv := &notificationv1.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "flux-system"},
		Spec: notificationv1.ReceiverSpec{Type: notificationv1.GenericReceiver, SecretRef: &meta.LocalObjectReference{Name: "hook"},
			Resources: []notificationv1.ReceiverResource{{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{
				APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.GitRepositoryKind, Name: "bench"}}}},
	}
	if err := b.c.Create(ctx, rcv); err != nil {
		return err
	}
	url := "http://" + b.receiver + rcv.GetWebhookPath("bench")
	for i := 0; i < 300; i++ {
		resp, err := http.Post(url, "application/json", nil) //nolint:noctx
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				b.hookURL.Store(url)
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("receiver never became ready")
}

// measurePush commits a change to one app, pushes it and returns the time
// until the change is in the cluster; it also records when the new
// artifact was stored.
func (b *bench) measurePush(i int) (time.Duration, error) {
	ctx := context.Background()
	target := name(b.infra, b.infra)
	version := fmt.Sprint(i)
	if err := os.WriteFile(filepath.Join(b.work, target, "objects.yaml"), []byte(objects(target, version)), 0o644); err != nil {
		return 0, err
	}
	if err := git(b.work, "commit", "-q", "-am", "push "+version); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := git(b.work, "push", "-q", "origin", "main"); err != nil {
		return 0, err
	}
	var fetched time.Duration
	for {
		if fetched == 0 && b.sourceMoved() {
			fetched = time.Since(start)
		}
		cm := &corev1.ConfigMap{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: "bench", Name: target}, cm); err == nil && cm.Data["version"] == version {
			break
		}
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("push %d not applied within a minute", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	applied := time.Since(start)
	if fetched == 0 {
		fetched = applied
		if !b.sourceMoved() {
			return 0, fmt.Errorf("push %d applied but the source revision did not move", i)
		}
	}
	b.fetchLatencies = append(b.fetchLatencies, fetched)
	return applied, nil
}

// sourceMoved reports whether the GitRepository has a revision newer than
// the last one seen, and records it.
func (b *bench) sourceMoved() bool {
	repo := &sourcev1.GitRepository{}
	err := b.c.Get(context.Background(), client.ObjectKey{Namespace: "flux-system", Name: "bench"}, repo)
	if err != nil || repo.Status.Artifact == nil || repo.Status.Artifact.Revision == b.lastRevision {
		return false
	}
	b.lastRevision = repo.Status.Artifact.Revision
	return true
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := (len(s)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return s[idx]
}

// peakRSS reads the process's high-water mark of resident memory.
func peakRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb int64
			_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "VmHWM:"), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func git(dir string, args ...string) error {
	_, err := gitserver.Run(dir, args...)
	return err
}
