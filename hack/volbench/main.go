// Command volbench measures btrfs volume creates through the node
// agent's volume API, as a CSI driver's controller sends them: N volumes,
// W at a time, with the tenant under a quota, on a fresh sparse loop btrfs
// each round. Beside it, in the same run, the floor: the same creates as
// the bare steps a durable create cannot skip, a subvolume, its qgroup
// limit and one durable record file, W at a time, on a fresh loop btrfs
// too. It prints p50, p99 and the wall time of each, and the ratios.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/internal/testing/benchstat"
	"github.com/strata-gitops/strata/internal/testing/btrfsagent"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/btrfs"
)

const (
	tenant = "bench"
	token  = "bench-tenant-token-0123456789"
)

type config struct {
	volumes, workers, rounds int
	size, disk               int64
	quota                    bool
}

func main() {
	var c config
	flag.IntVar(&c.volumes, "volumes", 200, "volumes created per round")
	flag.IntVar(&c.workers, "workers", 10, "creates in flight at once")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs the floor, then strata, each on a fresh filesystem")
	flag.Int64Var(&c.size, "size", 64<<20, "bytes per volume")
	flag.Int64Var(&c.disk, "disk", 4<<30, "bytes of each round's loop btrfs")
	flag.BoolVar(&c.quota, "quota", true, "put the tenant under a quota (the store then checks it under a per-tenant lock)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if os.Geteuid() != 0 {
		log.Fatal("volbench attaches loop devices and mounts: run as root")
	}
	dir, err := os.MkdirTemp("", "strata-volbench-")
	if err != nil {
		log.Fatal(err)
	}
	err = run(dir, c)
	btrfsagent.CleanUp(dir)
	if err != nil {
		log.Fatal(err)
	}
}

// run alternates the floor and strata, a fresh filesystem each.
func run(dir string, c config) error {
	var floor, strata []time.Duration
	var floorWall, strataWall []time.Duration
	for r := range c.rounds {
		lat, wall, err := floorRound(dir, fmt.Sprintf("floor-%d", r), c)
		if err != nil {
			return fmt.Errorf("floor, round %d: %w", r+1, err)
		}
		floor, floorWall = append(floor, lat...), append(floorWall, wall)
		lat, wall, err = strataRound(dir, fmt.Sprintf("strata-%d", r), c)
		if err != nil {
			return fmt.Errorf("strata, round %d: %w", r+1, err)
		}
		strata, strataWall = append(strata, lat...), append(strataWall, wall)
	}
	fmt.Printf("btrfs volume create, %d volumes of %d MiB, %d at a time, %d rounds on fresh %d GiB loop btrfs\n",
		c.volumes, c.size>>20, c.workers, c.rounds, c.disk>>30)
	print := func(name string, lat, wall []time.Duration) {
		fmt.Printf("  %-70s p50 %6.1f ms  p99 %6.1f ms  wall %.2f s (median round)\n", name,
			ms(benchstat.Percentile(lat, 50)), ms(benchstat.Percentile(lat, 99)), benchstat.Percentile(wall, 50).Seconds())
	}
	print("floor (subvolume, qgroup limit, one durable record)", floor, floorWall)
	print(fmt.Sprintf("strata (POST /v1/volumes to the agent's volume API, tenant quota %v)", c.quota), strata, strataWall)
	fmt.Printf("  strata/floor: p50 %.2fx, p99 %.2fx\n",
		ms(benchstat.Percentile(strata, 50))/ms(benchstat.Percentile(floor, 50)), ms(benchstat.Percentile(strata, 99))/ms(benchstat.Percentile(floor, 99)))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// concurrently runs create for 0..n-1, workers at a time, and returns
// each one's latency and the wall time.
func concurrently(n, workers int, create func(i int) error) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	errs := make(chan error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				if err := create(i); err != nil {
					errs <- err
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	return lat, wall, <-errs
}

// strataRound creates the volumes through the volume API.
func strataRound(dir, name string, c config) ([]time.Duration, time.Duration, error) {
	n, err := btrfsagent.OnLoop(dir, name, c.disk, tenant, token)
	if err != nil {
		return nil, 0, err
	}
	defer n.Srv.Close()
	if c.quota {
		n.Store.Quotas = map[string]btrfsnode.Quota{tenant: {VolumeBytes: int64(c.volumes) * c.size * 2}}
	}
	ctx := context.Background()
	return concurrently(c.volumes, c.workers, func(i int) error {
		_, err := n.Client.CreateVolume(ctx, wire.CreateRequest{Name: fmt.Sprintf("v%03d", i), SizeBytes: c.size})
		return err
	})
}

// floorRound makes the same volumes as bare steps on a filesystem of
// its own: a subvolume, its limit, and a record written durably
// (written, synced, renamed, its directory synced).
func floorRound(dir, name string, c config) ([]time.Duration, time.Duration, error) {
	n, err := btrfsagent.OnLoop(dir, name, c.disk, tenant, token)
	if err != nil {
		return nil, 0, err
	}
	n.Srv.Close()
	ctx := context.Background()
	base := filepath.Join(n.Mnt, "floor")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, 0, err
	}
	fs, err := btrfs.Open(ctx, base)
	if err != nil {
		return nil, 0, err
	}
	return concurrently(c.volumes, c.workers, func(i int) error {
		sub := filepath.Join(base, fmt.Sprintf("v%03d", i))
		if err := fs.CreateSubvolume(ctx, sub); err != nil {
			return err
		}
		if err := fs.SetLimit(ctx, sub, c.size); err != nil {
			return err
		}
		return atomicfile.Write(sub+".json", []byte(fmt.Sprintf(`{"name":"v%03d","sizeBytes":%d}`+"\n", i, c.size)))
	})
}
