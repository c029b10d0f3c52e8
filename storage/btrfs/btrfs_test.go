package btrfs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/btrfs"
)

func open(t *testing.T) *btrfs.Filesystem {
	t.Helper()
	mnt := testenv.BtrfsDisk(t, 1<<30)
	fs, err := btrfs.Open(context.Background(), mnt)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestOpenRefusesAnotherFilesystem(t *testing.T) {
	_, err := btrfs.Open(context.Background(), "/proc")
	if !errors.Is(err, btrfs.ErrNotBtrfs) {
		t.Fatalf("Open(/proc) = %v, want ErrNotBtrfs", err)
	}
}

func TestQuotaLimitsAndAccountsASubvolume(t *testing.T) {
	ctx := context.Background()
	fs := open(t)
	vol := filepath.Join(fs.Path, "vol")
	if err := fs.CreateSubvolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if ok, err := btrfs.IsSubvolume(vol); !ok || err != nil {
		t.Fatalf("IsSubvolume(%s) = %v, %v", vol, ok, err)
	}
	if err := fs.SetLimit(ctx, vol, 8<<20); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "small"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fs.UpdateQuotaAccounting(ctx); err != nil {
		t.Fatal(err)
	}
	u, err := fs.Usage(vol)
	if err != nil {
		t.Fatal(err)
	}
	if u.Limit != 8<<20 || u.Referenced < 2<<20 || u.Referenced > 4<<20 {
		t.Fatalf("usage = %+v, want a limit of 8 MiB and about 2 MiB referenced", u)
	}
	// btrfs-progs sees the limit the ioctl set.
	out, err := fs.Runner.Run(ctx, "btrfs", "qgroup", "show", "--raw", "-re", fs.Path)
	if err != nil || !strings.Contains(string(out), "8388608") {
		t.Fatalf("btrfs qgroup show: %v\n%s", err, out)
	}
	err = writeSynced(filepath.Join(vol, "big"), make([]byte, 16<<20))
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("writing 16 MiB under an 8 MiB limit: %v, want EDQUOT", err)
	}
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

func TestSnapshotsAreReadOnlyAndClonesWritable(t *testing.T) {
	ctx := context.Background()
	fs := open(t)
	vol, snap, clone := filepath.Join(fs.Path, "vol"), filepath.Join(fs.Path, "snap"), filepath.Join(fs.Path, "clone")
	if err := fs.CreateSubvolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fs.Snapshot(ctx, vol, snap, true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "f"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("writing into a read-only snapshot: %v, want EROFS", err)
	}
	if err := fs.Snapshot(ctx, snap, clone, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "f"), []byte("after"), 0o644); err != nil {
		t.Fatalf("writing into a clone: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(snap, "f")); string(data) != "before" {
		t.Fatalf("the snapshot holds %q after its clone changed, want %q", data, "before")
	}
	for _, p := range []string{clone, snap, vol} {
		if err := fs.DeleteSubvolume(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after delete: %v", p, err)
		}
	}
	if err := fs.DeleteSubvolume(ctx, vol); err != nil {
		t.Fatalf("deleting a deleted subvolume again: %v", err)
	}
}

func TestCompressionAndNoCOW(t *testing.T) {
	ctx := context.Background()
	fs := open(t)
	vol := filepath.Join(fs.Path, "vol")
	if err := fs.CreateSubvolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if err := fs.SetCompression(ctx, vol, "zstd", 3); err != nil {
		t.Fatal(err)
	}
	out, err := fs.Runner.Run(ctx, "btrfs", "property", "get", vol, "compression")
	if err != nil || string(out) != "compression=zstd:3\n" {
		t.Fatalf("compression property = %q, %v", out, err)
	}
	if err := fs.SetCompression(ctx, vol, "bogus", 0); err == nil {
		t.Fatal("an unknown compression was accepted")
	}
	// btrfs turns down No_COW where compression is set.
	if err := btrfs.SetNoCOW(vol); err == nil {
		t.Fatal("No_COW was set on a compressed subvolume")
	}
	plain := filepath.Join(fs.Path, "plain")
	if err := fs.CreateSubvolume(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := btrfs.SetNoCOW(plain); err != nil {
		t.Fatal(err)
	}
	out, err = fs.Runner.Run(ctx, "lsattr", "-d", plain)
	if err != nil || len(out) < 16 || !strings.ContainsRune(string(out[:16]), 'C') {
		t.Fatalf("lsattr -d %s = %q, %v; want the C attribute", plain, out, err)
	}
}

func TestStatsListsTheDeviceAndItsCounters(t *testing.T) {
	fs := open(t)
	s, err := fs.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Size <= 0 || s.Free <= 0 || s.Free > s.Size || len(s.Devices) != 1 {
		t.Fatalf("stats = %+v", s)
	}
	d := s.Devices[0]
	if d.Size != 1<<30 || d.Used <= 0 || len(d.Errors) == 0 || d.Errors["corruption"] != 0 {
		t.Fatalf("device = %+v, want the 1 GiB loop device with zeroed error counters", d)
	}
}

// A subvolume made in a level-1 qgroup is its member from the start:
// btrfs-progs lists the group as its parent, and the group's limit stops
// writes into it.
func TestASubvolumeMadeInAGroupCountsAgainstItsLimit(t *testing.T) {
	ctx := context.Background()
	fs := open(t)
	g := btrfs.GroupFor("tenant")
	if err := fs.EnsureGroup(ctx, g, 8<<20); err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(fs.Path, "vol")
	if err := fs.CreateSubvolume(ctx, vol, g); err != nil {
		t.Fatal(err)
	}
	id, err := btrfs.SubvolumeID(vol)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fs.Runner.Run(ctx, "btrfs", "qgroup", "show", "-p", "--raw", fs.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !hasParent(string(out), "0/"+strconv.FormatUint(id, 10), g.String()) {
		t.Fatalf("qgroup 0/%d is not in %s:\n%s", id, g, out)
	}
	err = writeSynced(filepath.Join(vol, "big"), make([]byte, 16<<20))
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("writing 16 MiB under the group's 8 MiB limit: %v, want EDQUOT", err)
	}
	// Ensured again with no limit, the group lets the write through.
	if err := fs.EnsureGroup(ctx, g, 0); err != nil {
		t.Fatal(err)
	}
	if err := writeSynced(filepath.Join(vol, "big"), make([]byte, 16<<20)); err != nil {
		t.Fatalf("writing 16 MiB once the group's limit is lifted: %v", err)
	}
}

// hasParent says whether `btrfs qgroup show -p` lists parent for child.
func hasParent(show, child, parent string) bool {
	for _, line := range strings.Split(show, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == child && strings.Contains(line, parent) {
			return true
		}
	}
	return false
}

// A qgroup the kernel refuses is reported with the filesystem and what to
// do, not as a bare errno.
func TestAGroupOnAFilesystemWithoutQuotasSaysHowToTurnThemOn(t *testing.T) {
	ctx := context.Background()
	fs := open(t)
	if _, err := fs.Runner.Run(ctx, "btrfs", "quota", "disable", fs.Path); err != nil {
		t.Fatal(err)
	}
	err := fs.EnsureGroup(ctx, btrfs.GroupFor("tenant"), 8<<20)
	if err == nil || !strings.Contains(err.Error(), "btrfs quota enable "+fs.Path) {
		t.Fatalf("EnsureGroup with quotas off = %v, want an error that says to run btrfs quota enable %s", err, fs.Path)
	}
}
