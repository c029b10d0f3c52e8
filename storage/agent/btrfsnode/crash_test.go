package btrfsnode_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/btrfs"
)

// What a power cut is modelled as: the store's disk is a loop device over
// a file on a btrfs of its own, and a `cp --reflink` of that file, taken
// while changes run, is the disk as of the writes the loop device had
// completed. That is a power cut on a disk without a volatile cache;
// mounting the copy replays what a real restart replays.
const crashTenant = "t"

// state is where one volume's or snapshot's change stands.
type state int

const (
	making  state = iota + 1 // asked for, not yet acknowledged
	made                     // acknowledged
	gone                     // its delete acknowledged
	leaving                  // its delete asked for
)

// changeLog is every name's state, as the workers report them. Every
// cutEvery acknowledgements it asks for a power cut on cut.
type changeLog struct {
	mu       sync.Mutex
	states   map[string]state
	acks     int
	cutEvery int
	cut      chan struct{}
}

func (l *changeLog) set(name string, s state) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states[name] = s
	if s != made && s != gone {
		return
	}
	if l.acks++; l.acks%l.cutEvery == 0 {
		select {
		case l.cut <- struct{}{}:
		default: // a cut is on its way
		}
	}
}

// copy is the states as of now.
func (l *changeLog) copy() map[string]state {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]state, len(l.states))
	for k, v := range l.states {
		out[k] = v
	}
	return out
}

// TestAcknowledgedChangesSurviveAPowerCut runs creates, snapshots,
// clones and deletes ten at a time, cuts the power under them again and
// again, and restarts the store on each cut: every acknowledged change is
// there (an acknowledged delete stays gone), and what was not
// acknowledged is either whole or swept into quarantine.
func TestAcknowledgedChangesSurviveAPowerCut(t *testing.T) {
	testenv.NeedTools(t, "cp", "mkfs.btrfs")
	host := testenv.BtrfsDisk(t, 4<<30)
	disk := testenv.LoopDiskIn(t, host, 1<<30)
	mnt := filepath.Join(t.TempDir(), "store")
	if err := localdisk.MountBtrfs(disk, mnt); err != nil {
		t.Fatal(err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = exec.Command("umount", mnt).Run()
		}
	})
	s, err := btrfsnode.Open(context.Background(), filepath.Join(mnt, "strata"), nil, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	s.Quotas = map[string]btrfsnode.Quota{crashTenant: {VolumeBytes: 1 << 40}}
	img := backingFile(t, disk)

	log := &changeLog{states: map[string]state{}, cutEvery: 20, cut: make(chan struct{}, 1)}
	type cut struct {
		image  string
		states map[string]state
	}
	var cuts []cut
	done := make(chan struct{})
	go func() {
		defer close(done)
		runChanges(t, s, log, 10, 6)
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-log.cut:
			// The states before the copy say what was durable when it
			// started; those after it, which deletes had begun by the
			// time it ended, and may be in it.
			before := log.copy()
			image := filepath.Join(host, fmt.Sprintf("cut-%d.img", len(cuts)))
			if out, err := exec.Command("cp", "--reflink=always", img, image).CombinedOutput(); err != nil {
				t.Fatalf("copying the disk: %v: %s", err, out)
			}
			cuts = append(cuts, cut{image, settled(before, log.copy())})
		}
	}
	if t.Failed() {
		return
	}
	if len(cuts) < 3 {
		t.Fatalf("only %d power cuts were taken during the changes", len(cuts))
	}
	// One btrfs with the store's ID mounted at a time.
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("unmounting the store: %v: %s", err, out)
	}
	mounted = false
	for i, c := range cuts {
		t.Run(fmt.Sprintf("cut-%d", i), func(t *testing.T) { checkAfterCut(t, c.image, c.states) })
	}
}

// settled keeps as made only what was made before the copy and still
// made after it; what a delete started on meanwhile may be either way.
func settled(before, after map[string]state) map[string]state {
	for name, st := range before {
		if st == made && after[name] != made {
			before[name] = leaving
		}
	}
	return before
}

// runChanges has each of workers make, in rounds, a volume, a snapshot
// of it and a clone of that, then delete the volume with its snapshot.
func runChanges(t *testing.T, s *btrfsnode.Store, log *changeLog, workers, rounds int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				v, snap, clone := fmt.Sprintf("v-%d-%d", w, r), fmt.Sprintf("s-%d-%d", w, r), fmt.Sprintf("c-%d-%d", w, r)
				steps := []struct {
					names []string
					to    state
					do    func() error
				}{
					{[]string{v}, made, func() error {
						_, _, err := s.Create(ctx, crashTenant, btrfsnode.CreateRequest{Name: v, SizeBytes: 16 * mib})
						return err
					}},
					{[]string{"snapshots/" + snap}, made, func() error {
						_, _, err := s.CreateSnapshot(ctx, crashTenant, btrfsnode.SnapshotRequest{Name: snap, Volume: v})
						return err
					}},
					{[]string{clone}, made, func() error {
						_, _, err := s.Clone(ctx, crashTenant, btrfsnode.CloneRequest{Name: clone, Source: btrfsnode.Source{Snapshot: snap}})
						return err
					}},
					{[]string{v, "snapshots/" + snap}, gone, func() error { return s.Delete(ctx, crashTenant, v, true) }},
				}
				for _, step := range steps {
					before := making
					if step.to == gone {
						before = leaving
					}
					for _, n := range step.names {
						log.set(n, before)
					}
					if err := step.do(); err != nil {
						t.Errorf("%v: %v", step.names, err)
						return
					}
					for _, n := range step.names {
						log.set(n, step.to)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// checkAfterCut starts the store on a copy of its disk, as an agent
// starting after the power came back, and checks it against what had
// been acknowledged when the copy was taken.
func checkAfterCut(t *testing.T, image string, states map[string]state) {
	dev, err := loopdev.Attach(image)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", dev).Run() })
	mnt := filepath.Join(t.TempDir(), "store")
	if err := localdisk.MountBtrfs(dev, mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	ctx := context.Background()
	s, err := btrfsnode.Open(ctx, filepath.Join(mnt, "strata"), nil, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx, []string{crashTenant}); err != nil {
		t.Fatal(err)
	}
	for name, st := range states {
		path, err := find(s, name)
		switch {
		case st == made && err != nil:
			t.Errorf("%s was acknowledged made, and after the cut: %v", name, err)
		case st == gone && err == nil:
			t.Errorf("%s was acknowledged deleted, and after the cut it is back", name)
		case err == nil:
			if ok, err := btrfs.IsSubvolume(path); !ok || err != nil {
				t.Errorf("%s has a record after the cut but its data %s is no subvolume (%v)", name, path, err)
			}
		case contract.KindOf(err) != contract.NotFound:
			t.Errorf("%s after the cut: %v", name, err)
		}
	}
	checkEveryEntryIsWhole(t, s)
}

// find returns the data of a volume or of "snapshots/NAME".
func find(s *btrfsnode.Store, name string) (string, error) {
	if snap, ok := strings.CutPrefix(name, "snapshots/"); ok {
		got, err := s.GetSnapshot(crashTenant, snap)
		return got.Path, err
	}
	got, err := s.Get(crashTenant, name)
	return got.Path, err
}

// checkEveryEntryIsWhole checks that after the sweep every directory in
// the tenant's layout has a record that reads, over a subvolume.
func checkEveryEntryIsWhole(t *testing.T, s *btrfsnode.Store) {
	vols, err := s.List(crashTenant)
	if err != nil {
		t.Fatalf("listing volumes after the cut: %v", err)
	}
	snaps, err := s.ListSnapshots(crashTenant, "")
	if err != nil {
		t.Fatalf("listing snapshots after the cut: %v", err)
	}
	for dir, records := range map[string]int{
		filepath.Join(s.Base, crashTenant):              len(vols) + 1, // and snapshots/
		filepath.Join(s.Base, crashTenant, "snapshots"): len(snaps),
	} {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if len(entries) > records {
			t.Errorf("%s holds %d entries after the sweep, but only %d records read: %v", dir, len(entries), records, entries)
		}
	}
	for _, v := range vols {
		if ok, err := btrfs.IsSubvolume(v.Path); !ok || err != nil {
			t.Errorf("volume %s has a record after the cut but its data is no subvolume (%v)", v.Name, err)
		}
	}
}

// backingFile is the file behind a loop device.
func backingFile(t *testing.T, dev string) string {
	out, err := exec.Command("losetup", "--noheadings", "--output", "BACK-FILE", dev).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
