package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/controlplane"
	"github.com/strata-gitops/strata/internal/local/gitserver"
	"github.com/strata-gitops/strata/internal/netaddr"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/status"
)

// The GitRepository's shard: with -flux, a strata controller watching only
// this shard is the source for Flux's kustomize-controller.
const (
	shardLabel  = "sharding.fluxcd.io/key"
	sourceShard = "source"
)

// bench is one control plane with the generated repository and objects.
type bench struct {
	config
	dir        string
	cp         *controlplane.ControlPlane
	kubeconfig string
	c          client.WithWatch
	work       string
	repoURL    string
	hookURL    atomic.Value
	receiver   string
	metrics    string
	pprof      string

	// withFinalizerPolicy installs the chart's policy that adds Flux's
	// finalizer before the Kustomizations are created, as a cluster with
	// strata's chart has it.
	withFinalizerPolicy bool

	lastRevision   string
	fetchLatencies []time.Duration
}

func newBench(cfg config) (*bench, error) {
	b := &bench{config: cfg, receiver: freeAddr(), metrics: freeAddr(), pprof: freeAddr()}
	var err error
	if b.dir, err = os.MkdirTemp("", "strata-bench-"); err != nil {
		return nil, err
	}
	policy := filepath.Join(b.dir, "audit-policy.yaml")
	rules := auditPolicy
	if cfg.requests {
		rules = auditEverything
	}
	if err := os.WriteFile(policy, []byte(rules), 0o644); err != nil {
		return nil, err
	}
	b.cp, err = controlplane.Start(controlplane.Options{
		AssetsDir: filepath.Join(b.root, "bin", "k8s"), CRDDirs: []string{filepath.Join(b.root, "charts", "strata", "crds")},
		APIServerFlags: map[string]string{
			// envtest's default service range holds only ~250 Services.
			"service-cluster-ip-range": "10.96.0.0/12",
			"audit-policy-file":        policy,
			"audit-log-path":           b.auditLog(),
			"audit-log-mode":           "batch",
		},
	})
	if err != nil {
		return nil, err
	}
	kc, err := b.cp.Kubeconfig()
	if err != nil {
		return nil, err
	}
	b.kubeconfig = filepath.Join(b.dir, "kubeconfig")
	if err := os.WriteFile(b.kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	b.c, err = client.NewWithWatch(b.cp.Config, client.Options{Scheme: scheme.New()})
	return b, err
}

func (b *bench) close() {
	if b.cp != nil {
		_ = b.cp.Stop()
	}
	if os.Getenv("STRATA_BENCH_KEEP") == "" {
		_ = os.RemoveAll(b.dir)
	} else {
		fmt.Println("kept", b.dir)
	}
}

// populate serves and fills the repository and creates the objects.
func (b *bench) populate() error {
	if err := b.serveRepository(); err != nil {
		return err
	}
	rev, err := b.generate()
	if err != nil {
		return err
	}
	b.lastRevision = rev
	return b.createObjects()
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
	if b.withFinalizerPolicy {
		policy, err := b.finalizerPolicy()
		if err != nil {
			return err
		}
		if err := b.installFinalizerPolicy(policy, "flux-system"); err != nil {
			return err
		}
	}
	if err := b.c.Create(ctx, &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "flux-system", Labels: map[string]string{shardLabel: sourceShard}},
		Spec: sourcev1.GitRepositorySpec{URL: b.repoURL, Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"}},
	}); err != nil {
		return err
	}
	for i := 0; i < b.kustomizations; i++ {
		if err := b.c.Create(ctx, b.kustomization(i)); err != nil {
			return err
		}
	}
	return nil
}

// kustomization is the i-th Kustomization: an infrastructure one, or an
// app that depends on one of them.
func (b *bench) kustomization(i int) *kustomizev1.Kustomization {
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
	return ks
}

func (b *bench) waitAllReady(rev string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	states, err := b.observe(ctx, &kustomizev1.KustomizationList{}, client.InNamespace("flux-system"))
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	last := map[string]*kustomizev1.Kustomization{}
	readyCount := 0
	for obj := range states {
		ks := obj.(*kustomizev1.Kustomization)
		last[ks.Name] = ks
		now := status.IsReady(ks) && ks.Status.LastAppliedRevision == rev
		if now != ready[ks.Name] {
			readyCount += map[bool]int{true: 1, false: -1}[now]
			ready[ks.Name] = now
		}
		if readyCount == b.kustomizations {
			return nil
		}
	}
	if ks := firstHoldingUp(last, ready); ks != nil {
		return fmt.Errorf("%d of %d Kustomizations not Ready at %s within %s, e.g. %s: applied %s, conditions %+v",
			b.kustomizations-readyCount, b.kustomizations, rev, limit, ks.Name, ks.Status.LastAppliedRevision, ks.Status.Conditions)
	}
	return fmt.Errorf("not all Kustomizations Ready within %s", limit)
}

// firstHoldingUp is the first not Ready Kustomization by name that is not
// merely waiting for a dependency, else the first not Ready one: the one
// to look at when a pass does not finish.
func firstHoldingUp(last map[string]*kustomizev1.Kustomization, ready map[string]bool) *kustomizev1.Kustomization {
	var notReady []*kustomizev1.Kustomization
	for _, ks := range last {
		if !ready[ks.Name] {
			notReady = append(notReady, ks)
		}
	}
	if len(notReady) == 0 {
		return nil
	}
	slices.SortFunc(notReady, func(a, b *kustomizev1.Kustomization) int { return strings.Compare(a.Name, b.Name) })
	for _, ks := range notReady {
		if c := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition); c == nil || c.Reason != meta.DependencyNotReadyReason {
			return ks
		}
	}
	return notReady[0]
}

// waitReconciles polls the controller's metrics until n Kustomization
// reconciles have finished, and says when the first had (zero when none).
func (b *bench) waitReconciles(n int, limit time.Duration) (first time.Time, err error) {
	err = poll(limit, 50*time.Millisecond, func() error {
		done := reconciles(b.metrics)
		if done > 0 && first.IsZero() {
			first = time.Now()
		}
		if done < n {
			return fmt.Errorf("not finished within %s: %d of %d reconciles", limit, done, n)
		}
		return nil
	})
	return first, err
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

// freeAddr is a free loopback address; the bench cannot go on without one.
func freeAddr() string {
	addr, err := netaddr.Free()
	if err != nil {
		log.Fatal(err)
	}
	return addr
}

func git(dir string, args ...string) error {
	_, err := gitserver.Run(dir, args...)
	return err
}
