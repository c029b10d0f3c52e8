// Command csibench measures a volume's way through strata's CSI driver
// beside the floor, the bare tools that make the same thing:
//
//   - -backend lvm (loopback): CreateVolume → NodeStageVolume →
//     NodePublishVolume, against truncate + losetup + mkfs.ext4 + mount;
//   - -backend btrfs: CreateVolume → ControllerPublishVolume (the NFS
//     export) → NodeStageVolume → NodePublishVolume, against btrfs
//     subvolume create + btrfs qgroup limit on the same filesystem.
//
// Both run the same number of volumes with the same parallelism,
// alternating in rounds, in one process, so that the ratio is measured
// side by side. `make bench` runs it; results go to docs/benchmarks.md
// by hand.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/testing/benchstat"
	"github.com/strata-gitops/strata/internal/testing/csienv"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

type config struct {
	backend                   string
	volumes, parallel, rounds int
	size                      int64
	cpuProfile                string
}

func main() {
	var c config
	flag.StringVar(&c.backend, "backend", "lvm", "lvm (the loopback volume manager) or btrfs")
	flag.IntVar(&c.volumes, "volumes", 100, "volumes per round and path")
	flag.IntVar(&c.parallel, "parallel", 10, "volumes in flight at once")
	flag.IntVar(&c.rounds, "rounds", 2, "rounds; each runs the floor, then strata")
	flag.Int64Var(&c.size, "size", 1<<30, "bytes per volume")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the strata rounds to this file")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	klog.LogToStderr(false) // mount-utils logs every format
	klog.SetOutput(io.Discard)
	c.cpuProfile = *cpuProfile
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

func run(c config) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("csibench attaches loop devices and mounts: run as root")
	}
	cp, err := testenv.StartAPIServer(nil)
	if err != nil {
		return err
	}
	defer cp.Stop() //nolint:errcheck // best effort on the way out
	dir, err := os.MkdirTemp("", "strata-csibench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o := csienv.Defaults(filepath.Join(dir, "strata"))
	o.Node, o.Class, o.Backend = "bench-node", "bench", "loopback"
	o.DiskSize = int64(c.volumes) * c.size / 8 // thin, overprovisioned tenfold
	start := csienv.Start
	if c.backend == "btrfs" {
		start, o.DiskSize = csienv.StartBtrfs, 4*int64(c.volumes)*c.size // quotas only: the disk is sparse
	}
	env, err := start(context.Background(), cp.Config, o)
	if env != nil {
		defer env.Stop() //nolint:errcheck // best effort on the way out
	}
	if err != nil {
		return err
	}
	s, err := newStrata(env, filepath.Join(dir, "mounts"))
	if err != nil {
		return err
	}
	var floor path = &loopFloor{dir: filepath.Join(dir, "floor")}
	floorName, strataName := "floor: truncate+losetup+mkfs.ext4+mount", "strata: CreateVolume+NodeStage+NodePublish"
	if c.backend == "btrfs" {
		params, secrets, mount := env.BtrfsClass()
		s.params, s.secrets, s.capability, s.publish = params, secrets, rwx, true
		floor = &btrfsFloor{dir: filepath.Join(mount, "floor")}
		floorName, strataName = "floor: btrfs subvolume create+qgroup limit", "strata: Create+ControllerPublish+NodeStage+NodePublish"
	}
	var floorTimes, strataTimes []time.Duration
	for r := 1; r <= c.rounds; r++ {
		for _, p := range []struct {
			name  string
			times *[]time.Duration
			path  path
		}{{"floor", &floorTimes, floor}, {"strata", &strataTimes, s}} {
			start := time.Now()
			stop := profile(c.cpuProfile, p.name == "strata")
			times, err := measure(c, fmt.Sprintf("r%d", r), p.path)
			stop()
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", p.name, r, err)
			}
			*p.times = append(*p.times, times...)
			fmt.Printf("round %d %-6s %d volumes in %s (p50 %s)\n", r, p.name, len(times),
				time.Since(start).Round(time.Millisecond), benchstat.Percentile(times, 50).Round(time.Millisecond))
		}
	}
	report(c, floorName, strataName, floorTimes, strataTimes)
	s.reportSteps()
	return nil
}

func report(c config, floorName, strataName string, floor, strata []time.Duration) {
	fmt.Printf("\n%d volumes of %d MiB, %d at a time, %d rounds; per volume:\n", c.volumes, c.size>>20, c.parallel, c.rounds)
	fmt.Printf("%-56s %8s %8s\n", "", "p50", "p99")
	fmt.Printf("%-56s %8s %8s\n", floorName, ms(benchstat.Percentile(floor, 50)), ms(benchstat.Percentile(floor, 99)))
	fmt.Printf("%-56s %8s %8s\n", strataName, ms(benchstat.Percentile(strata, 50)), ms(benchstat.Percentile(strata, 99)))
	fmt.Printf("%-56s %7.2fx %7.2fx\n", "ratio", ratio(strata, floor, 50), ratio(strata, floor, 99))
}

// reportSteps shows where strata's time goes, call by call.
func (s *strata) reportSteps() {
	fmt.Printf("\nstrata, by call:\n")
	for _, name := range stepNames {
		if times := s.steps[name]; len(times) > 0 && times[len(times)-1] > 0 {
			fmt.Printf("  %-54s %8s %8s\n", name, ms(benchstat.Percentile(times, 50)), ms(benchstat.Percentile(times, 99)))
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }

func ratio(a, b []time.Duration, p int) float64 {
	return float64(benchstat.Percentile(a, p)) / float64(benchstat.Percentile(b, p))
}

// path makes one mounted volume, and takes them all away again.
type path interface {
	make(ctx context.Context, name string, size int64) error
	clean(ctx context.Context) error
}

// measure makes c.volumes volumes, c.parallel at a time, and returns how
// long each took; then it cleans up (not timed).
func measure(c config, round string, p path) ([]time.Duration, error) {
	ctx := context.Background()
	times := make([]time.Duration, c.volumes)
	errs := make(chan error, c.volumes)
	slots := make(chan struct{}, c.parallel)
	var wg sync.WaitGroup
	for i := range c.volumes {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			start := time.Now()
			if err := p.make(ctx, fmt.Sprintf("vol-%s-%03d", round, i), c.size); err != nil {
				errs <- err
				return
			}
			times[i] = time.Since(start)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return times, p.clean(ctx)
}

// loopFloor makes a mounted ext4 on a loop device with the tools alone.
type loopFloor struct {
	dir string
	mu  sync.Mutex
	// made are the mount points and devices to take away.
	mounts, devices []string
}

func (f *loopFloor) make(_ context.Context, name string, size int64) error {
	img, mnt := filepath.Join(f.dir, name+".img"), filepath.Join(f.dir, name)
	if err := os.MkdirAll(mnt, 0o750); err != nil {
		return err
	}
	if err := sh("truncate", "-s", fmt.Sprint(size), img); err != nil {
		return err
	}
	dev, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		return fmt.Errorf("losetup %s: %w", img, err)
	}
	device := strings.TrimSpace(string(dev))
	f.remember(nil, &device)
	if err := sh("mkfs.ext4", "-q", "-F", "-m0", device); err != nil {
		return err
	}
	if err := sh("mount", device, mnt); err != nil {
		return err
	}
	f.remember(&mnt, nil)
	return nil
}

func (f *loopFloor) remember(mount, device *string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mount != nil {
		f.mounts = append(f.mounts, *mount)
	}
	if device != nil {
		f.devices = append(f.devices, *device)
	}
}

func (f *loopFloor) clean(context.Context) error {
	for _, m := range f.mounts {
		if err := sh("umount", m); err != nil {
			return err
		}
	}
	for _, d := range f.devices {
		if err := sh("losetup", "--detach", d); err != nil {
			return err
		}
	}
	f.mounts, f.devices = nil, nil
	return os.RemoveAll(f.dir)
}

func sh(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// btrfsFloor makes a subvolume with a quota with the tools alone.
type btrfsFloor struct {
	dir  string
	once sync.Once
}

func (f *btrfsFloor) make(_ context.Context, name string, size int64) error {
	var err error
	f.once.Do(func() { err = os.MkdirAll(f.dir, 0o755) })
	if err != nil {
		return err
	}
	sub := filepath.Join(f.dir, name)
	if err := sh("btrfs", "subvolume", "create", sub); err != nil {
		return err
	}
	return sh("btrfs", "qgroup", "limit", fmt.Sprint(size), sub)
}

func (f *btrfsFloor) clean(context.Context) error {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := sh("btrfs", "subvolume", "delete", filepath.Join(f.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// strata makes a volume through the CSI services.
type strata struct {
	csi.ControllerClient
	csi.NodeClient
	env *csienv.Env
	dir string
	// What the class asks for: parameters and secrets, the capability,
	// and whether volumes are published (exported) by the controller.
	params, secrets map[string]string
	capability      *csi.VolumeCapability
	publish         bool
	mu              sync.Mutex
	// made are the volume IDs with their staging and target paths.
	made [][3]string
	// steps are the times of each CSI call, by call, over all rounds.
	steps map[string][]time.Duration
}

func newStrata(env *csienv.Env, dir string) (*strata, error) {
	s := &strata{env: env, dir: dir, capability: ext4, steps: map[string][]time.Duration{}}
	cc, err := csienv.Dial(env.ControllerEndpoint)
	if err != nil {
		return nil, err
	}
	nc, err := csienv.Dial(env.NodeEndpoint)
	if err != nil {
		return nil, err
	}
	s.ControllerClient, s.NodeClient = csi.NewControllerClient(cc), csi.NewNodeClient(nc)
	return s, nil
}

var (
	ext4 = &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	rwx = &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
)

// benchNode is the node ID of the environment's node.
const benchNode = "bench-node|127.0.0.1"

func (s *strata) make(ctx context.Context, name string, size int64) error {
	var took [len(stepNames)]time.Duration
	last := time.Now()
	step := func(i int) { now := time.Now(); took[i], last = now.Sub(last), now }
	rsp, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{s.capability}, Parameters: s.params, Secrets: s.secrets})
	if err != nil {
		return fmt.Errorf("CreateVolume %s: %w", name, err)
	}
	step(0)
	id, volumeContext := rsp.GetVolume().GetVolumeId(), rsp.GetVolume().GetVolumeContext()
	var pc map[string]string
	if s.publish {
		pub, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: benchNode,
			VolumeCapability: s.capability, Secrets: s.secrets, VolumeContext: volumeContext})
		if err != nil {
			return fmt.Errorf("ControllerPublishVolume %s: %w", name, err)
		}
		pc = pub.GetPublishContext()
	}
	step(1)
	staging, target := filepath.Join(s.dir, name, "staging"), filepath.Join(s.dir, name, "target")
	if _, err := s.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: s.capability,
		PublishContext: pc, VolumeContext: volumeContext}); err != nil {
		return fmt.Errorf("NodeStageVolume %s: %w", name, err)
	}
	step(2)
	if _, err := s.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: s.capability, PublishContext: pc, VolumeContext: volumeContext}); err != nil {
		return fmt.Errorf("NodePublishVolume %s: %w", name, err)
	}
	step(3)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.made = append(s.made, [3]string{id, staging, target})
	for i, d := range took {
		s.steps[stepNames[i]] = append(s.steps[stepNames[i]], d)
	}
	return nil
}

// stepNames are the CSI calls a volume takes, in order.
var stepNames = [...]string{"CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"}

func (s *strata) clean(ctx context.Context) error {
	for _, m := range s.made {
		if _, err := s.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: m[0], TargetPath: m[2]}); err != nil {
			return err
		}
		if _, err := s.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: m[0], StagingTargetPath: m[1]}); err != nil {
			return err
		}
		if s.publish {
			if _, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: m[0], NodeId: benchNode,
				Secrets: s.secrets}); err != nil {
				return err
			}
		}
		if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: m[0], Secrets: s.secrets}); err != nil {
			return err
		}
	}
	s.made = nil
	return nil
}

// profile starts a CPU profile when asked and returns its stop.
func profile(file string, on bool) func() {
	if file == "" || !on {
		return func() {}
	}
	f, err := os.Create(file)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
