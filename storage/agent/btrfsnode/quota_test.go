package btrfsnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/contract"
)

// A tenant's quota bounds its volumes, snapshots and their number on
// every create, clone, expand and snapshot; another tenant is not bound
// by it. A subvolume the tenant nests inside a volume escapes the
// volume's quota until the store adopts it into the tenant's qgroup;
// from then on the kernel refuses its writes past the tenant's total.
func TestTenantQuotas(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	s.Quotas = map[string]btrfsnode.Quota{"t": {VolumeBytes: 96 * mib, SnapshotBytes: 64 * mib, Snapshots: 2}}
	create := func(tenant, name string, size int64) error {
		_, _, err := s.Create(ctx, tenant, btrfsnode.CreateRequest{Name: name, SizeBytes: size})
		return err
	}
	if err := create("t", "a", 64*mib); err != nil {
		t.Fatal(err)
	}
	wantKind(t, create("t", "b", 64*mib), contract.NoSpace, "a volume over the tenant's quota")
	if err := create("t", "b", 32*mib); err != nil {
		t.Fatal(err)
	}
	big := int64(40 * mib)
	_, err := s.Update(ctx, "t", "b", btrfsnode.UpdateRequest{SizeBytes: &big})
	wantKind(t, err, contract.NoSpace, "an expand over the tenant's quota")
	_, _, err = s.Clone(ctx, "t", btrfsnode.CloneRequest{Name: "c", Source: btrfsnode.Source{Volume: "b"}})
	wantKind(t, err, contract.NoSpace, "a clone over the tenant's quota")
	if err := create("u", "a", 200*mib); err != nil {
		t.Fatalf("another tenant is bound by t's quota: %v", err)
	}

	if _, _, err := s.CreateSnapshot(ctx, "t", btrfsnode.SnapshotRequest{Name: "s1", Volume: "a"}); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.CreateSnapshot(ctx, "t", btrfsnode.SnapshotRequest{Name: "s2", Volume: "b"})
	wantKind(t, err, contract.NoSpace, "a snapshot over the tenant's snapshot bytes")
	s.Quotas["t"] = btrfsnode.Quota{VolumeBytes: 96 * mib, SnapshotBytes: 1 << 30, Snapshots: 1}
	_, _, err = s.CreateSnapshot(ctx, "t", btrfsnode.SnapshotRequest{Name: "s2", Volume: "b"})
	wantKind(t, err, contract.NoSpace, "a snapshot over the tenant's snapshot count")

	b, err := s.Get("t", "b")
	if err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(b.Path, "escape")
	if err := s.FS.CreateSubvolume(ctx, nested); err != nil {
		t.Fatal(err)
	}
	var notices []string
	s.Notice = func(reason, message string) { notices = append(notices, reason+": "+message) }
	if err := s.AdoptNested(ctx); err != nil {
		t.Fatal(err)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], nested) {
		t.Fatalf("notices %q, want one naming %s", notices, nested)
	}
	err = writeFile(filepath.Join(nested, "fill"), 200*mib)
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("writing 200 MiB into a subvolume nested in a volume of a tenant limited to 160 MiB: %v, want EDQUOT", err)
	}
}

// writeFile writes size bytes to path and syncs them, so that a quota
// takes effect within the call.
func writeFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, mib)
	for written := int64(0); written < size; written += mib {
		if _, err := f.Write(chunk); err != nil {
			return err
		}
	}
	return f.Sync()
}

// Creates that run at once are counted against the quota while they are
// being made, before their records exist: of ten 16 MiB creates under an
// 80 MiB quota, five succeed and five are refused, whatever the order.
func TestConcurrentCreatesDoNotOvershootTheQuota(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	s.Quotas = map[string]btrfsnode.Quota{"t": {VolumeBytes: 80 * mib}}
	errs := make(chan error, 10)
	for i := range 10 {
		go func() {
			_, _, err := s.Create(ctx, "t", btrfsnode.CreateRequest{Name: fmt.Sprintf("v%d", i), SizeBytes: 16 * mib})
			errs <- err
		}()
	}
	var made, refused int
	for range 10 {
		switch err := <-errs; {
		case err == nil:
			made++
		case contract.KindOf(err) == contract.NoSpace:
			refused++
		default:
			t.Error(err)
		}
	}
	if made != 5 || refused != 5 {
		t.Fatalf("%d made and %d refused, want 5 and 5", made, refused)
	}
	if vs, err := s.List("t"); err != nil || len(vs) != 5 {
		t.Fatalf("List = %d volumes, %v; want 5", len(vs), err)
	}
}

func TestParseQuotas(t *testing.T) {
	q, err := btrfsnode.ParseQuotas("team-a:volumes=100Gi, team-a:snapshots=20Gi,team-a:snapshotCount=50\nteam-b:volumes=1Ti")
	if err != nil {
		t.Fatal(err)
	}
	if a := q["team-a"]; a.VolumeBytes != 100<<30 || a.SnapshotBytes != 20<<30 || a.Snapshots != 50 {
		t.Fatalf("team-a: %+v", a)
	}
	if b := q["team-b"]; b.VolumeBytes != 1<<40 || b.Snapshots != 0 {
		t.Fatalf("team-b: %+v", b)
	}
	for _, bad := range []string{"team-a", "team-a:volumes", "team-a:volumes=lots", "team-a:disks=1Gi", "team-a:snapshotCount=-1", "a b:volumes=1Gi"} {
		if _, err := btrfsnode.ParseQuotas(bad); err == nil {
			t.Errorf("ParseQuotas(%q) accepted it", bad)
		}
	}
}
