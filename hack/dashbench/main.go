// Command dashbench measures the controller's dashboard with a large
// cluster in its caches: 1000 Kustomizations and 10,000 claims of a
// strata class (each with its PV) on one API server. It runs strata's
// controller twice, without and then with the dashboard, and reports the
// overview's and the volumes page's answer times (p50, p99, measured at
// the client on loopback, so the server's time and a little more), their
// load to interactive in headless Chromium, and the controller's peak
// memory with and without the dashboard.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/benchenv"
	"github.com/strata-gitops/strata/internal/testing/benchstat"
	"github.com/strata-gitops/strata/internal/testing/browser"
)

func main() {
	o := options{}
	flag.IntVar(&o.kustomizations, "kustomizations", 1000, "Kustomizations in the cache")
	flag.IntVar(&o.claims, "claims", 10000, "claims of a strata class in the cache, each with its PV")
	flag.IntVar(&o.requests, "requests", 200, "timed requests per page")
	flag.IntVar(&o.loads, "loads", 10, "page loads in Chromium per page")
	flag.StringVar(&o.strata, "strata", "bin/strata", "the strata binary")
	flag.StringVar(&o.heap, "heap", "", "write the controller's heap profile, with the dashboard, after its pages were served, to this file")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "dashbench:", err)
		os.Exit(1)
	}
}

type options struct {
	kustomizations, claims, requests, loads int
	strata, heap                            string
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "strata-dashbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := benchenv.Start(dir, nil)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, kcPath := env.Client, env.Kubeconfig
	ctx := context.Background()
	start := time.Now()
	if err := populate(ctx, c, o); err != nil {
		return err
	}
	fmt.Printf("dashbench: %d Kustomizations (suspended) and %d claims with their PVs made in %.0f s\n", o.kustomizations, o.claims, time.Since(start).Seconds())

	off, err := controllerMemory(o, dir, kcPath, "")
	if err != nil {
		return err
	}
	addr := freeAddr()
	on, err := controllerMemory(o, dir, kcPath, addr, func() error { return measurePages(ctx, o, "http://"+addr) })
	if err != nil {
		return err
	}
	fmt.Printf("dashbench: controller heap in use after a GC: %d MiB without the dashboard, %d MiB with it after its pages were served: %d MiB more\n",
		off.heap>>20, on.heap>>20, (on.heap-off.heap)>>20)
	fmt.Printf("dashbench: controller peak RSS: %d MiB without the dashboard, %d MiB with it: %d MiB more (garbage of the pages built back to back, before the GC took it)\n",
		off.peak>>20, on.peak>>20, (on.peak-off.peak)>>20)
	return nil
}

// memory is a controller's: its heap in use after a GC, and its peak
// resident memory.
type memory struct{ heap, peak int64 }

// controllerMemory runs strata's controller, with the dashboard on addr
// ("": none), waits for its caches to hold every claim, runs use, and
// returns its memory.
func controllerMemory(o options, dir, kubeconfig, addr string, use ...func() error) (memory, error) {
	dashboard, health, pprof, metrics := "0", freeAddr(), freeAddr(), freeAddr()
	if addr != "" {
		dashboard = addr
	}
	ctl := exec.Command(o.strata, "controller", "--kubeconfig", kubeconfig, "--artifact-dir", filepath.Join(dir, "artifacts"),
		"--artifact-bind-address", "0", "--metrics-bind-address", metrics, "--health-probe-bind-address", health, "--receiver-bind-address", "0",
		"--alerts-bind-address", "0", "--dashboard-bind-address", dashboard,
		// The image populator on, as the chart runs it: it caches the claims and pods too.
		"--populator-image", "strata.local/strata:bench", "--dashboard-auth", "none", "--pprof-bind-address", pprof)
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return memory{}, err
	}
	defer logFile.Close()
	ctl.Stdout, ctl.Stderr = logFile, logFile
	if err := ctl.Start(); err != nil {
		return memory{}, err
	}
	defer func() { _ = ctl.Process.Signal(os.Interrupt); _ = ctl.Wait() }()
	if err := waitAnswers("http://"+health+"/readyz", "ok"); err != nil {
		return memory{}, err
	}
	if addr != "" {
		if err := waitAnswers("http://"+addr+"/volumes", fmt.Sprintf(`data-total="%d"`, o.claims)); err != nil {
			return memory{}, err
		}
	}
	// Both runs settle as long, so that each controller's informers have
	// listed everything before the peak is read.
	time.Sleep(10 * time.Second)
	for _, f := range use {
		if err := f(); err != nil {
			return memory{}, err
		}
	}
	if o.heap != "" && addr != "" {
		heap, err := fetch("http://" + pprof + "/debug/pprof/heap")
		if err != nil {
			return memory{}, err
		}
		if err := os.WriteFile(o.heap, []byte(heap), 0o644); err != nil {
			return memory{}, err
		}
	}
	// The pprof endpoint's gc=1 collects first; the metrics then say what
	// stays: the caches, the informers, the kept pages.
	if _, err := fetch("http://" + pprof + "/debug/pprof/heap?gc=1"); err != nil {
		return memory{}, err
	}
	text, err := fetch("http://" + metrics + "/metrics")
	if err != nil {
		return memory{}, err
	}
	m := memory{peak: benchstat.PeakRSS(ctl.Process.Pid)}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return memory{}, err
			}
			m.heap = int64(f)
		}
	}
	if m.heap == 0 {
		return memory{}, errors.New("the controller's metrics have no go_memstats_heap_inuse_bytes")
	}
	return m, nil
}

// waitAnswers polls url until its body holds want.
func waitAnswers(url, want string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if body, err := fetch(url); err == nil && strings.Contains(body, want) {
			return nil
		}
		time.Sleep(200 * time.Millisecond) // polling with a deadline
	}
	return fmt.Errorf("%s never showed %s", url, want)
}

func fetch(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}

// measurePages times the overview and the volumes page, first by their
// answers, then by their loads in Chromium.
func measurePages(ctx context.Context, o options, base string) error {
	pages := []struct{ name, path string }{{"overview", "/"}, {"volumes", "/volumes"}, {"volumes, searched and sorted by size", "/volumes?q=ns-42&sort=size&desc=1"}, {"gitops", "/gitops"}}
	for _, p := range pages {
		// As served (a page built once per change and second), and each
		// built anew: a query parameter the page ignores defeats its memo.
		for _, fresh := range []bool{false, true} {
			var took []time.Duration
			for i := range o.requests {
				url := base + p.path
				if fresh {
					url += map[bool]string{true: "&", false: "?"}[strings.Contains(url, "?")] + "bench=" + strconv.Itoa(i)
				}
				began := time.Now()
				if _, err := fetch(url); err != nil {
					return err
				}
				took = append(took, time.Since(began))
			}
			fmt.Printf("dashbench: %-38s %-13s p50 %6.1f ms, p99 %6.1f ms (%d requests)\n", p.name, map[bool]string{false: "as served", true: "built anew"}[fresh],
				ms(benchstat.Percentile(took, 50)), ms(benchstat.Percentile(took, 99)), len(took))
		}
	}
	tab, stop, err := browser.Open(ctx)
	if err != nil {
		return err
	}
	defer stop()
	for _, p := range pages[:2] {
		var interactive, loaded []time.Duration
		for range o.loads {
			if err := chromedp.Do(tab, chromedp.Navigate("about:blank"), chromedp.Navigate(base+p.path)); err != nil {
				return err
			}
			t, err := chromedp.Run(tab, chromedp.Evaluate[[]float64](
				`(e => [e.domInteractive, e.loadEventEnd])(performance.getEntriesByType('navigation')[0])`))
			if err != nil || len(t) != 2 {
				return errors.Join(errors.New("reading the navigation timing"), err)
			}
			interactive = append(interactive, time.Duration(t[0]*float64(time.Millisecond)))
			loaded = append(loaded, time.Duration(t[1]*float64(time.Millisecond)))
		}
		fmt.Printf("dashbench: %-38s in Chromium: interactive p50 %6.1f ms, max %6.1f ms; loaded p50 %6.1f ms, max %6.1f ms (%d loads)\n", p.name,
			ms(benchstat.Percentile(interactive, 50)), ms(benchstat.Percentile(interactive, 100)),
			ms(benchstat.Percentile(loaded, 50)), ms(benchstat.Percentile(loaded, 100)), len(loaded))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// populate makes the cluster the pages show: two nodes, the strata class,
// the claims (in 100 namespaces, each bound to its PV) and the
// Kustomizations (suspended, so the controller applies none; in chains
// of ten by dependsOn).
func populate(ctx context.Context, c client.Client, o options) error {
	for _, n := range []string{"node-a", "node-b"} {
		if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "strata-fast"}, Provisioner: storagev1alpha1.CSIDriver,
		Parameters: map[string]string{storagev1alpha1.DeviceClassParameter: "fast"}}); err != nil {
		return err
	}
	for i := range 100 {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%02d", i)}}); err != nil {
			return err
		}
	}
	return inParallel(16, o.claims+o.kustomizations, func(i int) error {
		if i < o.claims {
			return claimWithVolume(ctx, c, i)
		}
		return kustomization(ctx, c, i-o.claims)
	})
}

func claimWithVolume(ctx context.Context, c client.Client, i int) error {
	ns, name := fmt.Sprintf("ns-%02d", i%100), fmt.Sprintf("data-%05d", i)
	size := resource.MustParse(fmt.Sprintf("%dGi", 1+i%50))
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%05d", i)}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: "strata-fast", ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: name},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: storagev1alpha1.CSIDriver, VolumeHandle: fmt.Sprintf("fast/%05d", i)}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{[]string{"node-a", "node-b"}[i%2]}}}}}}},
	}}
	if err := c.Create(ctx, pv); err != nil {
		return err
	}
	// Provisioned for its first pod, as strata's WaitForFirstConsumer
	// classes are: the scheduler's annotation names the node.
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{"volume.kubernetes.io/selected-node": []string{"node-a", "node-b"}[i%2]}}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("strata-fast"), VolumeName: pv.Name,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}
	if err := c.Create(ctx, pvc); err != nil {
		return err
	}
	// Bound, as the PV controller (not run here) would mark it.
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: size},
		AccessModes: pvc.Spec.AccessModes}
	return c.Status().Update(ctx, pvc)
}

func kustomization(ctx context.Context, c client.Client, i int) error {
	k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%02d", i%100), Name: fmt.Sprintf("ks-%04d", i)},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./", Prune: true, Suspend: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster"}}}
	if i >= 100 { // chains of ten within a namespace: ks-N on ks-(N-100)
		k.Spec.DependsOn = []kustomizev1.DependencyReference{{Name: fmt.Sprintf("ks-%04d", i-100)}}
	}
	return c.Create(ctx, k)
}

// inParallel runs do(0..n-1) on workers goroutines, returning the first
// error.
func inParallel(workers, n int, do func(int) error) error {
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
	for i := 0; i < n && err == nil; i++ {
		select {
		case next <- i:
		case err = <-errs:
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	return err
}

// freeAddr is a free loopback port.
func freeAddr() string {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}
