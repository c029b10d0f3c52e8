// Command bench measures the Kustomization engine on a local control plane:
// what its requests cost the API server, N Kustomizations from controller
// start to all Ready beside the floor (the same objects as bare apply
// patches, measured in turn with it, -pairs times), the controller's
// peak memory, a no-change pass after each of several restarts (the median
// time, and the writes), and push-to-applied latency through the
// Receiver. With -flux it runs Flux's kustomize-controller
// over the same workload on a fresh control plane in the same run, as the
// reference. `make bench` runs it; results go to docs/benchmarks.md by hand,
// with the command.
package main

import (
	"flag"
	"fmt"
	"log"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/testing/benchstat"
)

type config struct {
	kustomizations, infra, concurrent, pushes int
	restarts, pairs                           int
	qps                                       float64
	burst                                     int
	strata, flux, root, profile, profileFirst string
	requests, fluxDefaults                    bool
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
	flag.StringVar(&c.flux, "flux", "", "Flux kustomize-controller binary to measure as the reference (empty: strata only)")
	flag.StringVar(&c.profile, "profile", "", "write a CPU profile of strata's controller over its no-change pass to this file, its first 3 s")
	flag.StringVar(&c.profileFirst, "profile-first", "", "write a CPU profile of strata's controller over its first pass to this file, its first 20 s")
	flag.BoolVar(&c.fluxDefaults, "flux-defaults", false, "with -flux, also run Flux with its default flags (slow: 4 at a time, dependencies requeued after 30 s)")
	flag.StringVar(&c.root, "root", ".", "repository root (for bin/k8s and the CRDs)")
	flag.IntVar(&c.restarts, "restarts", 5, "no-change passes of strata's controller, each from a new start; the median is reported")
	flag.IntVar(&c.pairs, "pairs", 3, "floors and strata first passes measured in turn, each on a fresh control plane; the median ratio is reported")
	flag.BoolVar(&c.requests, "requests", false, "log every request and print the controller's first-pass requests by verb and resource (slows the API server)")
	flag.Parse()
	if c.pairs < 1 || c.restarts < 1 {
		log.Fatal("-pairs and -restarts must be at least 1")
	}
	ctrllog.SetLogger(logr.Discard())
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

// result is one controller's figures.
type result struct {
	name      string
	firstPass time.Duration
	peakRSS   int64
	// CPU seconds over the first pass: the controller's, and the whole
	// machine's (API server, etcd and the bench besides).
	controllerCPU, machineCPU float64
	apiServerCPU, etcdCPU     float64
	// secondPass is the no-change pass, the median of secondPasses (one
	// per restart); secondPassFirst when its first reconcile had finished.
	secondPass, secondPassFirst    time.Duration
	secondPasses, secondPassFirsts []time.Duration
	// secondPassUnfinished says why the no-change pass has no time.
	secondPassUnfinished string
	writes               writes
	push                 []time.Duration
	fetch                []time.Duration
	// pushCPU is the controller's CPU seconds per push, from the push until
	// every Kustomization has recorded its revision.
	pushCPU float64
}

// firstPassLimit bounds the first pass: Flux took 12 minutes of it on
// this machine's better days.
const firstPassLimit = 40 * time.Minute

// secondPassLimit bounds the no-change pass.
const secondPassLimit = 5 * time.Minute

func run(cfg config) error {
	fmt.Printf("bench: %d Kustomizations (%d infrastructure), --concurrent=%d --kube-api-qps=%g --kube-api-burst=%d\n",
		cfg.kustomizations, cfg.infra, cfg.concurrent, cfg.qps, cfg.burst)
	costs, err := measureCosts(cfg)
	if err != nil {
		return fmt.Errorf("costs: %w", err)
	}
	printCosts(costs)
	s, err := strataBesideFloor(cfg)
	if err != nil {
		return err
	}
	if cfg.flux == "" {
		return nil
	}
	for _, defaults := range []bool{false, true} {
		if defaults && !cfg.fluxDefaults {
			continue
		}
		f, err := measure(cfg, fluxController{binary: cfg.flux, defaults: defaults}, true)
		if err != nil {
			// Flux may not finish in the bench's limit (four at a time
			// with 30 s requeues, or a slow machine): that is its figure.
			fmt.Printf("%s: %v\n", f.name, err)
			continue
		}
		f.print()
		// Three significant digits: strata's share of Flux's time is a
		// few hundredths.
		second := fmt.Sprintf("%.3gx", s.secondPass.Seconds()/f.secondPass.Seconds())
		if f.secondPassUnfinished != "" {
			second = fmt.Sprintf("under %.3gx", s.secondPass.Seconds()/secondPassLimit.Seconds())
		}
		fmt.Printf("ratio strata/%s: first pass %.3gx (Flux %.1fx as long), peak RSS %.2fx, no-change pass %s\n",
			f.name, s.firstPass.Seconds()/f.firstPass.Seconds(), f.firstPass.Seconds()/s.firstPass.Seconds(),
			float64(s.peakRSS)/float64(f.peakRSS), second)
	}
	return nil
}

func (r result) printFirstPass() {
	fmt.Printf("%s: first pass, controller start to all Ready: %.1f s; controller peak RSS %d MiB; CPU: controller %.1f s, kube-apiserver %.1f s, etcd %.1f s of %.1f s on the machine\n",
		r.name, r.firstPass.Seconds(), r.peakRSS>>20, r.controllerCPU, r.apiServerCPU, r.etcdCPU, r.machineCPU)
}

func (r result) print() {
	second := fmt.Sprintf("%.1f s", r.secondPass.Seconds())
	if r.secondPassUnfinished != "" {
		second = r.secondPassUnfinished
	}
	if len(r.secondPasses) > 1 {
		second += fmt.Sprintf(", the median of %d restarts (%s)", len(r.secondPasses), seconds(r.secondPasses))
	}
	fmt.Printf("%s: no-change pass, controller start to one reconcile each: %s (the first done after %.1f s); %s\n",
		r.name, second, r.secondPassFirst.Seconds(), r.writes)
	if len(r.push) > 0 {
		fmt.Printf("%s: push to applied through the receiver, %d pushes: p50 %d ms, p90 %d ms, max %d ms (new artifact stored: p50 %d ms); controller CPU per push, until every Kustomization recorded it: %.0f ms\n",
			r.name, len(r.push), benchstat.Percentile(r.push, 50).Milliseconds(), benchstat.Percentile(r.push, 90).Milliseconds(), benchstat.Percentile(r.push, 100).Milliseconds(),
			benchstat.Percentile(r.fetch, 50).Milliseconds(), r.pushCPU*1000)
	}
}

// strataBesideFloor measures the floor and strata's first pass in turn,
// -pairs times, each on a fresh control plane, and prints each pair's
// ratio and their median: a floor moved by a fifth or more within one
// run of the bench as the machine slowed and sped up, so a ratio is taken
// between neighbours. The last strata run goes on to the other passes.
func strataBesideFloor(cfg config) (result, error) {
	var s result
	var ratios, cpuRatios []float64
	for i := range cfg.pairs {
		floor, err := measureFloor(cfg)
		if err != nil {
			return s, fmt.Errorf("floor: %w", err)
		}
		fmt.Printf("floor: the same %d objects as bare server-side apply patches, %d at a time: %.1f s; CPU: kube-apiserver %.1f s, etcd %.1f s of %.1f s on the machine\n",
			4*cfg.kustomizations, floorWorkers, floor.took.Seconds(), floor.apiServerCPU, floor.etcdCPU, floor.machineCPU)
		if s, err = measure(cfg, strataController{}, i == cfg.pairs-1); err != nil {
			return s, fmt.Errorf("strata: %w", err)
		}
		ratios = append(ratios, s.firstPass.Seconds()/floor.took.Seconds())
		cpuRatios = append(cpuRatios, s.machineCPU/floor.machineCPU)
		fmt.Printf("pair %d: strata/floor: first pass %.2fx; the machine's CPU seconds %.2fx\n", i+1, ratios[i], cpuRatios[i])
	}
	s.print()
	fmt.Printf("ratio strata/floor: first pass %.2fx, the median of %d pairs (target 2x); the machine's CPU seconds %.2fx\n",
		median(ratios), cfg.pairs, median(cpuRatios))
	return s, nil
}

func median(xs []float64) float64 {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// measure runs the first pass for one controller on a fresh control
// plane, and with all, the no-change pass and the pushes after it.
func measure(cfg config, ctl controller, all bool) (result, error) {
	res := result{name: ctl.name()}
	b, err := newBench(cfg)
	if err != nil {
		return res, err
	}
	defer b.close()
	b.withFinalizerPolicy = ctl.finalizerPolicy()
	if err := b.populate(); err != nil {
		return res, err
	}
	stopSource, err := ctl.prepare(b)
	if err != nil {
		return res, err
	}
	defer stopSource()

	// From an idle control plane, as the floor.
	if _, err := waitIdle(time.Minute); err != nil {
		return res, err
	}
	machineStart, apiServerStart, etcdStart := machineCPU(), childrenCPU("kube-apiserver"), childrenCPU("etcd")
	proc, start, err := b.start(ctl)
	if err != nil {
		return res, err
	}
	if b.profileFirst != "" && ctl.name() == "strata" {
		go func() {
			if err := b.cpuProfile(b.profileFirst, 20*time.Second); err != nil {
				fmt.Printf("profiling the first pass: %v\n", err)
			}
		}()
	}
	if err := b.waitAllReady(b.lastRevision, firstPassLimit); err != nil {
		stop(proc)
		return res, err
	}
	res.firstPass = time.Since(start)
	res.peakRSS = benchstat.PeakRSS(proc.Process.Pid)
	res.controllerCPU, res.machineCPU = processCPU(proc.Process.Pid), machineCPU()-machineStart
	res.apiServerCPU, res.etcdCPU = childrenCPU("kube-apiserver")-apiServerStart, childrenCPU("etcd")-etcdStart
	stop(proc)
	// Printed now: a later pass may not finish.
	res.printFirstPass()
	if cfg.requests {
		fmt.Printf("%s: first pass\n", ctl.name())
		if err := b.printRequests(start, ctl.userAgent()); err != nil {
			return res, err
		}
	}
	if !all {
		return res, nil
	}
	return res, b.laterPasses(ctl, &res)
}

// laterPasses measures the no-change pass after each restart, then the
// pushes, into res.
func (b *bench) laterPasses(ctl controller, res *result) error {
	passStart := time.Now()
	restarts := 1 // Flux's no-change pass does not end within the limit
	if ctl.name() == "strata" {
		restarts = b.restarts
	}
	var proc *exec.Cmd
	var err error
	for range restarts {
		if proc != nil {
			stop(proc)
		}
		if proc, err = b.noChangePass(ctl, res); err != nil {
			return err
		}
	}
	defer stop(proc)
	res.secondPass = benchstat.Percentile(res.secondPasses, 50)
	res.secondPassFirst = benchstat.Percentile(res.secondPassFirsts, 50)
	if res.writes, err = b.writesSince(passStart, ctl.userAgent()); err != nil {
		return err
	}
	if ctl.servesReceiver() && b.pushes > 0 && res.secondPassUnfinished == "" {
		cpu := processCPU(proc.Process.Pid)
		res.push, err = b.pushLatencies()
		res.fetch = b.fetchLatencies
		res.pushCPU = (processCPU(proc.Process.Pid) - cpu) / float64(b.pushes)
	}
	return err
}

// noChangePass starts the controller again over the Kustomizations it
// applied and adds to res how long it took to reconcile each once, and
// when the first was done; it leaves the controller running.
func (b *bench) noChangePass(ctl controller, res *result) (*exec.Cmd, error) {
	proc, start, err := b.start(ctl)
	if err != nil {
		return nil, err
	}
	profiled := make(chan error, 1)
	if b.profile != "" && ctl.name() == "strata" && len(res.secondPasses) == 0 {
		go func() { profiled <- b.cpuProfile(b.profile, 3*time.Second) }()
	} else {
		profiled <- nil
	}
	first, err := b.waitReconciles(b.kustomizations, secondPassLimit)
	if err != nil {
		res.secondPassUnfinished = err.Error()
	} else {
		res.secondPasses = append(res.secondPasses, time.Since(start))
	}
	if !first.IsZero() {
		res.secondPassFirsts = append(res.secondPassFirsts, first.Sub(start))
	}
	if err := <-profiled; err != nil {
		stop(proc)
		return nil, fmt.Errorf("profiling the no-change pass: %w", err)
	}
	return proc, nil
}

// seconds lists durations as "0.6, 0.7 s".
func seconds(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", d.Seconds())
	}
	return strings.Join(parts, ", ") + " s"
}
