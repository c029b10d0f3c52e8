package lvmnode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/internal/testing/thingroup"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/lvm"
)

const (
	mib   = 1 << 20
	token = "0123456789abcdef0123456789abcdef"
	// tenant is the API's tenant the pairs belong to.
	tenant = "t"
)

// side is one node's end of a pair: a loopback volume manager with a
// real volume group and thin pool, the pair's thin volume "db", and the
// pair "p".
type side struct {
	store *Store
	vg    string
}

func newSide(t *testing.T, name string, size uint64) *side {
	t.Helper()
	ctx := context.Background()
	vg := "strata-pairs-" + name
	m := thingroup.New(t, vg, 256*mib, 128*mib)
	if err := m.CreateVolume(ctx, vg, lvm.VolumeSpec{Name: "db", Size: size, Pool: thingroup.Pool, Tags: []string{storagev1alpha1.LogicalVolumeTag("db")}}); err != nil {
		t.Fatal(err)
	}
	s := &side{store: &Store{LVM: m, Dir: t.TempDir()}, vg: vg}
	if _, err := s.store.SetPair(ctx, tenant, "p", wire.PairRequest{Volume: vg + "/db", Token: token}); err != nil {
		t.Fatal(err)
	}
	return s
}

// write writes data at off into the side's volume.
func (s *side) write(t *testing.T, volume string, off int64, data []byte) {
	t.Helper()
	f, _, err := s.store.open(context.Background(), s.vg, volume, os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// read reads a volume whole.
func (s *side) read(t *testing.T, volume string) []byte {
	t.Helper()
	f, size, err := s.store.open(context.Background(), s.vg, volume, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return data
}

func (s *side) pair(t *testing.T) wire.Pair {
	t.Helper()
	p, err := s.store.GetPair(context.Background(), tenant, "p")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// syncPair sends the next replica from one side to the other; cut, when set,
// says how many bytes of the stream arrive, and whole what the receiver's
// trailer check says. It returns the stream's length.
func syncPair(t *testing.T, from, to *side, cut func(stream []byte) int, whole error) (int, error) {
	t.Helper()
	ctx := context.Background()
	out, err := from.store.SnapshotForSend(ctx, tenant, "p", to.pair(t).Replicas)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := out.Stream(ctx, &stream); err != nil {
		t.Fatal(err)
	}
	n := stream.Len()
	body := io.Reader(&stream)
	if cut != nil {
		body = io.LimitReader(&stream, int64(cut(stream.Bytes())))
	}
	_, err = to.store.Receive(ctx, tenant, "p", out.Seq, out.Parent, out.MadeAt, body, func() error { return whole })
	if err == nil {
		err = from.store.Sent(ctx, tenant, "p", out.Seq)
	}
	return n, err
}

func TestAReplicaIsTheVolumeAndASyncSendsWhatChanged(t *testing.T) {
	a, b := newSide(t, "a1", 32*mib), newSide(t, "b1", 32*mib)
	a.write(t, "db", 0, random(8*mib, 1))
	whole, err := syncPair(t, a, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.pair(t); got.Latest != 1 || got.LatestAt == nil {
		t.Fatalf("after the first sync the backup holds %+v", got)
	}
	if !bytes.Equal(b.read(t, "db.r1"), a.read(t, "db")) {
		t.Fatal("replica 1 differs from the volume it was taken of")
	}

	a.write(t, "db", 20*mib, random(1*mib, 2))
	delta, err := syncPair(t, a, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if delta > 1*mib+64<<10 || delta >= whole {
		t.Errorf("the sync after 1 MiB changed sent %d bytes (the first sent %d)", delta, whole)
	}
	if !bytes.Equal(b.read(t, "db.r2"), a.read(t, "db")) {
		t.Fatal("replica 2 differs from the volume it was taken of")
	}
	if got := b.pair(t).Replicas; len(got) != 1 || got[0] != 2 {
		t.Errorf("the backup keeps replicas %v; want only the newest, 2", got)
	}
	if got := a.pair(t).Replicas; len(got) != 1 || got[0] != 2 {
		t.Errorf("the primary keeps replicas %v after the peer confirmed 2; want [2]", got)
	}
}

// A stream cut anywhere, or one whose trailer does not vouch for it,
// never replaces the last good replica, leaves nothing half-written
// behind, and the next sync builds on the replica kept.
func TestACutSyncKeepsTheLastGoodReplica(t *testing.T) {
	a, b := newSide(t, "a2", 16*mib), newSide(t, "b2", 16*mib)
	a.write(t, "db", 0, random(4*mib, 3))
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	good := b.read(t, "db.r1")
	a.write(t, "db", 1*mib, random(2*mib, 4))
	for name, c := range map[string]struct {
		cut   func([]byte) int
		whole error
	}{
		"in the header":   {func([]byte) int { return 7 }, nil},
		"inside a record": {func(s []byte) int { return len(s) / 2 }, nil},
		"before the end":  {func(s []byte) int { return len(s) - 1 }, nil},
		"no trailer":      {nil, errors.New("the stream is not whole")},
	} {
		if _, err := syncPair(t, a, b, c.cut, c.whole); err == nil {
			t.Fatalf("%s: a broken stream was taken", name)
		} else if !strings.Contains(err.Error(), "replica 1 is kept") {
			t.Errorf("%s: %v; want it to say replica 1 is kept", name, err)
		}
		if got := b.pair(t); got.Latest != 1 || !bytes.Equal(b.read(t, "db.r1"), good) {
			t.Fatalf("%s: the backup's replicas are %v after a broken stream", name, got.Replicas)
		}
		present, err := b.store.replicaVolumes(context.Background(), pairRecord{Name: "p", Group: b.vg, Volume: "db"})
		if err != nil || len(present) != 1 {
			t.Errorf("%s: replica volumes %v left (%v); want only replica 1", name, present, err)
		}
	}
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if p := b.pair(t); !bytes.Equal(b.read(t, replicaName("db", p.Latest)), a.read(t, "db")) {
		t.Error("the sync after the broken ones does not hold the volume")
	}
}

// What a crash leaves (a replica volume without its record, a record
// without its volume) is not a replica, and the next sync removes it.
func TestACrashLeftoverIsNoReplica(t *testing.T) {
	a, b := newSide(t, "a3", 16*mib), newSide(t, "b3", 16*mib)
	ctx := context.Background()
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.store.LVM.CreateSnapshot(ctx, b.vg, "db.r5", "db.r1", []string{replicaTag + "p"}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.recordReplica(tenant, "p", 7, replicaRecord{MadeAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if got := b.pair(t).Replicas; len(got) != 1 || got[0] != 1 {
		t.Fatalf("the backup shows replicas %v; a volume without a record, or a record without a volume, is none", got)
	}
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := lvm.FindVolume(ctx, b.store.LVM, b.vg, "db.r5"); !errors.Is(err, lvm.ErrNotFound) {
		t.Errorf("the leftover replica volume is still there after a sync: %v", err)
	}
	if _, err := os.Stat(b.store.replicaRecordPath(tenant, "p", 7)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leftover record is still there after a sync: %v", err)
	}
}

// Promotion gives the backup's volume the newest replica; failback then
// sends back only what the backup wrote, from the replica both hold.
func TestPromotionAndADeltaFailback(t *testing.T) {
	a, b := newSide(t, "a4", 16*mib), newSide(t, "b4", 16*mib)
	ctx := context.Background()
	a.write(t, "db", 0, random(6*mib, 5))
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	b.write(t, "db", 0, random(1*mib, 6)) // what the backup held before: overwritten
	if _, err := b.store.Promote(ctx, tenant, "p"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.read(t, "db"), a.read(t, "db")) {
		t.Fatal("the promoted volume does not hold the replica")
	}

	b.write(t, "db", 10*mib, random(1*mib, 7)) // the app runs on the backup
	sent, err := syncPair(t, b, a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sent > 1*mib+64<<10 {
		t.Errorf("failback sent %d bytes after 1 MiB was written on the backup", sent)
	}
	if _, err := a.store.Promote(ctx, tenant, "p"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.read(t, "db"), b.read(t, "db")) {
		t.Error("after failback the primary's volume differs from the backup's")
	}
}

// A volume grown after a replica was sent is sent at its new size, and
// the receiver grows its copy of the parent first.
func TestAGrownVolumeSyncs(t *testing.T) {
	a, b := newSide(t, "a5", 8*mib), newSide(t, "b5", 16*mib)
	ctx := context.Background()
	a.write(t, "db", 0, random(2*mib, 8))
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.store.LVM.ResizeVolume(ctx, a.vg, "db", 12*mib); err != nil {
		t.Fatal(err)
	}
	a.write(t, "db", 10*mib, random(1*mib, 9))
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.read(t, "db.r2"); !bytes.Equal(got[:12*mib], a.read(t, "db")) {
		t.Error("the replica of a grown volume differs from it")
	}
}

func TestBadPairsAreRefusedWithWhy(t *testing.T) {
	a := newSide(t, "a6", 8*mib)
	ctx := context.Background()
	if err := a.store.LVM.CreateVolume(ctx, a.vg, lvm.VolumeSpec{Name: "thick", Size: 4 * mib}); err != nil {
		t.Fatal(err)
	}
	if err := a.store.LVM.CreateVolume(ctx, a.vg, lvm.VolumeSpec{Name: "db2", Size: 4 * mib, Pool: thingroup.Pool, Tags: []string{storagev1alpha1.LogicalVolumeTag("db2")}}); err != nil {
		t.Fatal(err)
	}
	// A thin volume strata did not make: another driver's, or a person's.
	if err := a.store.LVM.CreateVolume(ctx, a.vg, lvm.VolumeSpec{Name: "foreign", Size: 4 * mib, Pool: thingroup.Pool}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		pair string
		req  wire.PairRequest
		kind contract.Kind
		want string
	}{
		"thick volume":  {"q", wire.PairRequest{Volume: a.vg + "/thick", Token: token}, contract.Invalid, "replicates thin volumes"},
		"no volume":     {"q", wire.PairRequest{Volume: a.vg + "/gone", Token: token}, contract.NotFound, "not found"},
		"short token":   {"q", wire.PairRequest{Volume: a.vg + "/db", Token: "short"}, contract.Invalid, "at least 32"},
		"other volume":  {"p", wire.PairRequest{Volume: a.vg + "/db2", Token: token}, contract.Conflict, "exists, of volume"},
		"bad pair name": {"-x", wire.PairRequest{Volume: a.vg + "/db", Token: token}, contract.Invalid, "option"},
		"no group":      {"q", wire.PairRequest{Volume: "db", Token: token}, contract.Invalid, "<volume group>/<volume>"},
		"not strata's":  {"q", wire.PairRequest{Volume: a.vg + "/foreign", Token: token}, contract.Forbidden, "not a claim's volume"},
	} {
		_, err := a.store.SetPair(ctx, tenant, c.pair, c.req)
		if contract.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want kind %d saying %q", name, err, c.kind, c.want)
		}
	}
	if err := a.store.AuthorizePair(tenant, "p", strings.Repeat("x", 32)); contract.KindOf(err) != contract.Forbidden {
		t.Errorf("a wrong token: %v; want Forbidden", err)
	}
	if err := a.store.AuthorizePair(tenant, "p", token); err != nil {
		t.Errorf("the pair's token: %v", err)
	}
	if _, err := a.store.Promote(ctx, tenant, "p"); contract.KindOf(err) != contract.NotFound {
		t.Errorf("promoting a pair without replicas: %v; want NotFound", err)
	}
}

// A mounted volume is not promoted: writing under its filesystem would
// corrupt it.
func TestAMountedVolumeIsNotPromoted(t *testing.T) {
	testenv.NeedTools(t, "mkfs.ext4", "mount")
	a, b := newSide(t, "a7", 16*mib), newSide(t, "b7", 16*mib)
	ctx := context.Background()
	if _, err := syncPair(t, a, b, nil, nil); err != nil {
		t.Fatal(err)
	}
	dev, err := b.store.LVM.DevicePath(ctx, b.vg, "db")
	if err != nil {
		t.Fatal(err)
	}
	dir := mountExt4(t, dev)
	_, err = b.store.Promote(ctx, tenant, "p")
	if contract.KindOf(err) != contract.InUse || !strings.Contains(err.Error(), dir) {
		t.Errorf("promoting a mounted volume: %v; want InUse naming %s", err, dir)
	}
}

// A fence stops every write to the pair's volume: its writers are
// killed, its filesystem is read-only wherever mounted, and its device
// refuses writes; unfencing undoes the last two.
func TestAFenceStopsEveryWriter(t *testing.T) {
	testenv.NeedTools(t, "mkfs.ext4", "mount", "blockdev", "sh")
	a := newSide(t, "a8", 16*mib)
	ctx := context.Background()
	dev, err := a.store.LVM.DevicePath(ctx, a.vg, "db")
	if err != nil {
		t.Fatal(err)
	}
	dir := mountExt4(t, dev)
	writer := exec.Command("sh", "-c", `exec 3>"$1/log"; echo ready >&3; exec sleep 600`, "sh", dir)
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- writer.Wait() }()
	t.Cleanup(func() { _ = writer.Process.Kill() })
	testenv.Eventually(t, 10*time.Second, func() error {
		if data, _ := os.ReadFile(dir + "/log"); string(data) != "ready\n" {
			return errors.New("the writer has not opened its file yet")
		}
		return nil
	})

	if _, err := a.store.FencePair(ctx, tenant, "p"); err != nil {
		t.Fatal(err)
	}
	if !a.pair(t).Fenced {
		t.Error("the pair does not say its volume is fenced")
	}
	t.Cleanup(func() { _ = loopdev.Writable(dev) }) // should the test stop before unfencing
	select {
	case err := <-exited:
		if err == nil {
			t.Error("the writer exited by itself, not killed by the fence")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer still runs after the fence")
	}
	if err := os.WriteFile(dir+"/after", []byte("x"), 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("writing to the fenced volume's filesystem: %v; want EROFS", err)
	}
	if f, err := os.OpenFile(dev, os.O_WRONLY, 0); err == nil {
		_, err := f.Write(make([]byte, 4096))
		f.Close()
		if !errors.Is(err, unix.EPERM) {
			t.Errorf("writing to the fenced volume's device: %v; want EPERM", err)
		}
	}

	if _, err := a.store.UnfencePair(ctx, tenant, "p"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/after", []byte("x"), 0o600); err != nil {
		t.Errorf("writing after the unfence: %v", err)
	}
	if a.pair(t).Fenced {
		t.Error("the pair says its volume is fenced after the unfence")
	}
}

// mountExt4 formats the device ext4 and mounts it until the test ends.
func mountExt4(t *testing.T, dev string) string {
	t.Helper()
	dir := t.TempDir()
	for _, cmd := range [][]string{{"mkfs.ext4", "-q", dev}, {"mount", dev, dir}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

// A fence outlives a restart: the kernel forgets a device's read-only
// flag at a reboot, and the agent sets it again from its record before
// it serves anything; an unfence removes the record.
func TestAFenceSurvivesARestart(t *testing.T) {
	testenv.NeedTools(t, "blockdev")
	a := newSide(t, "a9", 8*mib)
	ctx := context.Background()
	dev, err := a.store.LVM.DevicePath(ctx, a.vg, "db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopdev.Writable(dev) })
	if _, err := a.store.FencePair(ctx, tenant, "p"); err != nil {
		t.Fatal(err)
	}
	if err := loopdev.Writable(dev); err != nil { // what a reboot does to the flag
		t.Fatal(err)
	}
	if a.pair(t).Fenced {
		t.Fatal("the device is still read-only after the flag was cleared")
	}
	restarted := &Store{LVM: a.store.LVM, Dir: a.store.Dir}
	if restored, err := restarted.RestoreFences(ctx); err != nil || len(restored) != 1 || restored[0] != a.vg+"/db" {
		t.Fatalf("RestoreFences = %v, %v; want the pair's volume", restored, err)
	}
	if !a.pair(t).Fenced {
		t.Fatal("the fence did not come back after the restart")
	}
	if _, err := restarted.UnfencePair(ctx, tenant, "p"); err != nil {
		t.Fatal(err)
	}
	if restored, err := restarted.RestoreFences(ctx); err != nil || len(restored) != 0 || a.pair(t).Fenced {
		t.Fatalf("after an unfence RestoreFences = %v, %v, fenced %v; want nothing fenced", restored, err, a.pair(t).Fenced)
	}
}
