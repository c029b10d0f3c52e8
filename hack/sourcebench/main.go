// Command sourcebench measures push-to-applied for each source kind strata
// serves, side by side in one run and by the same path: a producer pushes
// (a git commit, an OCI artifact, a bucket object), calls a generic
// Receiver, and the time until the changed ConfigMap is in the cluster is
// taken. strata's controller runs in this process against a local control
// plane; the git server, distribution's registry (bin/registry) and MinIO
// (bin/minio) are real. Pushes alternate between the kinds, so that any
// drift of the machine falls on all three alike.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/app/manager"
	"github.com/strata-gitops/strata/internal/local/controlplane"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/testing/benchstat"
)

func main() {
	pushes := flag.Int("pushes", 20, "pushes per source kind")
	flag.Parse()
	if err := run(*pushes); err != nil {
		fmt.Fprintln(os.Stderr, "sourcebench:", err)
		os.Exit(1)
	}
}

// kind is one source kind's producer: it pushes content and says which
// revision the source will report.
type kind struct {
	name string
	push func(ctx context.Context, i int) error
}

func run(pushes int) error {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "strata-sourcebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := controlplane.Start(controlplane.Options{AssetsDir: filepath.Join(root, "bin", "k8s"),
		CRDDirs: []string{filepath.Join(root, "charts", "strata", "crds")}})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	c, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	receiver := freeAddr()
	o := manager.Defaults()
	o.MetricsAddr, o.HealthProbeAddr, o.ArtifactAddr, o.ReceiverAddr = "0", "0", "0", receiver
	o.ArtifactDir = filepath.Join(dir, "controller")
	mgr, err := manager.New(ctx, cp.Config, o)
	if err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	env := &world{ctx: ctx, c: c, root: root, dir: dir, receiver: receiver}
	kinds, stop, err := env.sources()
	defer stop()
	if err != nil {
		return err
	}
	samples := map[string][]time.Duration{}
	for i := 1; i <= pushes; i++ {
		for _, k := range kinds {
			d, err := env.measure(k, i)
			if err != nil {
				return fmt.Errorf("%s push %d: %w", k.name, i, err)
			}
			samples[k.name] = append(samples[k.name], d)
		}
	}
	fmt.Printf("push-to-applied, %d pushes per kind, receiver-driven, alternating kinds:\n", pushes)
	names := make([]string, 0, len(samples))
	for n := range samples {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := samples[n]
		fmt.Printf("  %-7s p50 %4d ms  p90 %4d ms  max %4d ms\n", n, benchstat.Percentile(d, 50).Milliseconds(),
			benchstat.Percentile(d, 90).Milliseconds(), benchstat.Percentile(d, 100).Milliseconds())
	}
	return nil
}

// measure pushes revision i of k, calls its Receiver and waits until the
// ConfigMap holds it.
func (w *world) measure(k kind, i int) (time.Duration, error) {
	start := time.Now()
	if err := k.push(w.ctx, i); err != nil {
		return 0, err
	}
	resp, err := http.Post(w.hooks[k.name], "application/json", nil) //nolint:noctx
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if err := w.waitApplied(k.name, i); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// waitApplied polls, every 5 ms, until the kind's ConfigMap holds push i.
func (w *world) waitApplied(name string, i int) error {
	want := fmt.Sprint(i)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if got, err := w.configMapValue(name); err == nil && got == want {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("ConfigMap %s did not reach push %d within a minute", name, i)
}
