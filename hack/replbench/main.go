// Command replbench measures strata's btrfs replication beside its floor,
// `btrfs send | btrfs receive` between the same two filesystems (with
// -mover lvm, the LVM mover beside a whole dd copy: lvm.go), and what a
// failback moves beside what changed:
//
//   - a whole first sync of a volume of -size bytes;
//   - an incremental sync after -change bytes were rewritten;
//   - a failback: the backup promoted, -change bytes written there, and
//     the sync back to the primary.
//
// strata's path is the agents' own: two volume APIs over TLS on two loop
// btrfs filesystems, a sync asked of the source's agent, which streams
// to the destination's. The floor runs the same btrfs commands with a
// pipe between them. Rounds alternate, floor first, in one process, so
// the ratio is measured side by side. `make bench` runs it (root only).
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/testing/benchstat"
	"github.com/strata-gitops/strata/internal/testing/btrfsagent"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

const (
	tenant = "bench"
	token  = "bench-tenant-token-0123456789"
	pair   = "bench-pair"
	secret = "bench-pair-token-0123456789abcdef0123"
)

type config struct {
	size, change int64
	rounds       int
	// mover is btrfs or lvm.
	mover string
}

func main() {
	var c config
	flag.Int64Var(&c.size, "size", 512<<20, "bytes of data in the volume")
	flag.Int64Var(&c.change, "change", 32<<20, "bytes rewritten before the incremental sync and written on the backup before failback")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs the floor, then strata")
	flag.StringVar(&c.mover, "mover", "btrfs", "btrfs, or lvm (thin volumes of the loopback volume manager; floor: dd of a snapshot)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if os.Geteuid() != 0 {
		log.Fatal("replbench attaches loop devices and mounts: run as root")
	}
	dir, err := os.MkdirTemp("", "strata-replbench-")
	if err != nil {
		log.Fatal(err)
	}
	err = run(dir, c)
	cleanUp(dir)
	if err != nil {
		log.Fatal(err)
	}
}

// agent is one node: a btrfs filesystem, its store and volume API.
type agent = btrfsagent.Node

func newAgent(dir, name string) (*agent, error) {
	return btrfsagent.OnLoop(dir, name, 8<<30, tenant, token)
}

func cleanUp(dir string) { btrfsagent.CleanUp(dir) }

// result is one round's figures.
type result struct {
	floorFull, strataFull, floorDelta, strataDelta time.Duration
	deltaBytes, failbackBytes                      int64
}

func run(dir string, c config) error {
	rounds, floorIs := oneRound, "btrfs send | btrfs receive on the same filesystems"
	if c.mover == "lvm" {
		rounds, floorIs = oneLVMRound, "dd of a thin snapshot onto the peer's volume, whole each time"
	}
	fmt.Printf("%s replication: a %d MiB volume, %d MiB changed, %d rounds (floor: %s)\n",
		c.mover, c.size>>20, c.change>>20, c.rounds, floorIs)
	var all []result
	for round := 1; round <= c.rounds; round++ {
		r, err := rounds(filepath.Join(dir, fmt.Sprint(round)), c)
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		fmt.Printf("round %d: whole %s (floor %s), incremental %s (floor %s, %d stream bytes), failback %d stream bytes\n",
			round, r.strataFull.Round(time.Millisecond), r.floorFull.Round(time.Millisecond),
			r.strataDelta.Round(time.Millisecond), r.floorDelta.Round(time.Millisecond), r.deltaBytes, r.failbackBytes)
		all = append(all, r)
	}
	report(all, c)
	return nil
}

func oneRound(dir string, c config) (result, error) {
	var r result
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, err
	}
	defer cleanUp(dir)
	a, err := newAgent(dir, "a")
	if err != nil {
		return r, err
	}
	defer a.Srv.Close()
	b, err := newAgent(dir, "b")
	if err != nil {
		return r, err
	}
	defer b.Srv.Close()
	ctx := context.Background()
	for _, ag := range []*agent{a, b} {
		if _, err := ag.Client.CreateVolume(ctx, wire.CreateRequest{Name: "db", SizeBytes: 2 * c.size}); err != nil {
			return r, err
		}
		if _, err := ag.Client.SetPair(ctx, pair, wire.PairRequest{Volume: "db", Token: secret}); err != nil {
			return r, err
		}
	}
	vol, err := a.Store.Get(tenant, "db")
	if err != nil {
		return r, err
	}
	if err := writeRandom(vol.Path, "data", c.size); err != nil {
		return r, err
	}
	if r.floorFull, err = floor(a, b, "full", ""); err != nil {
		return r, err
	}
	if _, r.strataFull, err = timedSync(ctx, a.Client, b.Srv.URL); err != nil {
		return r, err
	}
	if err := writeRandom(vol.Path, "changed", c.change); err != nil {
		return r, err
	}
	if r.floorDelta, err = floor(a, b, "delta", "full"); err != nil {
		return r, err
	}
	rep, took, err := timedSync(ctx, a.Client, b.Srv.URL)
	if err != nil {
		return r, err
	}
	r.strataDelta, r.deltaBytes = took, rep.StreamBytes
	// Failover, writes on the backup, failback.
	promoted, err := b.Client.Promote(ctx, pair)
	if err != nil {
		return r, err
	}
	if err := writeRandom(promoted.Path, "during-failover", c.change); err != nil {
		return r, err
	}
	if rep, _, err = timedSync(ctx, b.Client, a.Srv.URL); err != nil {
		return r, err
	}
	r.failbackBytes = rep.StreamBytes
	return r, nil
}

// timedSync asks the agent of from to sync the pair to the agent at
// peer, and says how long it took.
func timedSync(ctx context.Context, from *volumeapi.Client, peer string) (wire.Replica, time.Duration, error) {
	start := time.Now()
	rep, err := from.SyncPair(ctx, pair, wire.SyncRequest{Peer: peer, PeerTenant: tenant, Token: secret})
	return rep, time.Since(start), err
}

// floor takes a read-only snapshot of a's volume and sends it to b with
// btrfs-progs alone, incrementally from the floor's previous snapshot
// when parent is set, and returns how long that took.
func floor(a, b *agent, name, parent string) (time.Duration, error) {
	vol, err := a.Store.Get(tenant, "db")
	if err != nil {
		return 0, err
	}
	snaps, into := filepath.Join(a.Mnt, "floor"), filepath.Join(b.Mnt, "floor")
	for _, d := range []string{snaps, into} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return 0, err
		}
	}
	// The snapshot is timed too: strata's sync takes one.
	start := time.Now()
	snap := filepath.Join(snaps, name)
	if out, err := exec.Command("btrfs", "subvolume", "snapshot", "-r", vol.Path, snap).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("btrfs subvolume snapshot: %v: %s", err, out)
	}
	args := "btrfs send -q " + snap
	if parent != "" {
		args = "btrfs send -q -p " + filepath.Join(snaps, parent) + " " + snap
	}
	cmd := exec.Command("sh", "-c", args+" | btrfs receive -q "+into)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s: %v: %s", args, err, out)
	}
	return time.Since(start), nil
}

func writeRandom(dir, name string, size int64) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	return fillRandom(f, 0, size)
}

// fillRandom writes size random bytes at off of f, syncs and closes it.
func fillRandom(f *os.File, off, size int64) error {
	if _, err := io.Copy(io.NewOffsetWriter(f, off), io.LimitReader(rand.Reader, size)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// report prints the medians and ratios over the rounds.
func report(all []result, c config) {
	med := func(pick func(result) time.Duration) time.Duration {
		var d []time.Duration
		for _, r := range all {
			d = append(d, pick(r))
		}
		return benchstat.Percentile(d, 50)
	}
	mibs := func(bytes int64, d time.Duration) string {
		return fmt.Sprintf("%.0f MiB/s", float64(bytes)/float64(1<<20)/d.Seconds())
	}
	full, floorFull := med(func(r result) time.Duration { return r.strataFull }), med(func(r result) time.Duration { return r.floorFull })
	delta, floorDelta := med(func(r result) time.Duration { return r.strataDelta }), med(func(r result) time.Duration { return r.floorDelta })
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %12s %14s %12s %14s %8s\n", "median of rounds", "strata", "throughput", "floor", "throughput", "ratio")
	fmt.Fprintf(&b, "%-24s %12s %14s %12s %14s %7.2fx\n", "whole sync", full.Round(time.Millisecond), mibs(c.size, full),
		floorFull.Round(time.Millisecond), mibs(c.size, floorFull), full.Seconds()/floorFull.Seconds())
	fmt.Fprintf(&b, "%-24s %12s %14s %12s %14s %7.2fx\n", "incremental sync", delta.Round(time.Millisecond), mibs(c.change, delta),
		floorDelta.Round(time.Millisecond), mibs(c.change, floorDelta), delta.Seconds()/floorDelta.Seconds())
	last := all[len(all)-1]
	fmt.Fprintf(&b, "incremental stream: %d bytes for %d changed (%.2fx); failback stream: %d bytes for %d written on the backup (%.2fx)\n",
		last.deltaBytes, c.change, float64(last.deltaBytes)/float64(c.change), last.failbackBytes, c.change, float64(last.failbackBytes)/float64(c.change))
	fmt.Print(b.String())
}
