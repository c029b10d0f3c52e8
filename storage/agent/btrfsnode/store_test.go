package btrfsnode_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/nfs"
)

const mib = 1 << 20

func newStore(t *testing.T, exporter nfs.Exporter) *btrfsnode.Store {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on a loop device")
	mnt := testenv.BtrfsDisk(t, 1<<30)
	s, err := btrfsnode.Open(context.Background(), filepath.Join(mnt, "strata"), exporter, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantKind(t *testing.T, err error, kind contract.Kind, what string) {
	t.Helper()
	if contract.KindOf(err) != kind {
		t.Fatalf("%s: error %v (kind %d), want kind %d", what, err, contract.KindOf(err), kind)
	}
}

func TestCreateIsIdempotentAndLimitsTheVolume(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	uid, gid := 1000, 2000
	req := btrfsnode.CreateRequest{Name: "db", SizeBytes: 64 * mib,
		Tuning: btrfsnode.Tuning{Compression: "zstd", CompressionLevel: 3, UID: &uid, GID: &gid, Mode: "2770"}}
	v, created, err := s.Create(ctx, "team-a", req)
	if err != nil || !created {
		t.Fatalf("Create = %+v, %v, %v", v, created, err)
	}
	if v.Path != filepath.Join(s.Base, "team-a", "db", "data") || v.Node != "node-a" {
		t.Fatalf("volume = %+v, want it at {base}/team-a/db/data on node-a", v)
	}
	var st os.FileInfo
	if st, err = os.Stat(v.Path); err != nil || st.Mode().Perm() != 0o770 || st.Mode()&os.ModeSetgid == 0 {
		t.Fatalf("root of the volume: %v, %v; want drwxrws---", st.Mode(), err)
	}
	if u, err := s.FS.Usage(v.Path); err != nil || u.Limit != 64*mib {
		t.Fatalf("quota = %+v, %v; want a 64 MiB limit", u, err)
	}
	again, created, err := s.Create(ctx, "team-a", req)
	if err != nil || created || again.CreatedAt != v.CreatedAt {
		t.Fatalf("repeated Create = %+v, %v, %v; want the volume made before", again, created, err)
	}
	req.SizeBytes = 128 * mib
	_, _, err = s.Create(ctx, "team-a", req)
	wantKind(t, err, contract.Conflict, "Create with another size")
}

func TestExpandRaisesTheQuotaAndNeverShrinks(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	if _, _, err := s.Create(ctx, "t", btrfsnode.CreateRequest{Name: "v", SizeBytes: 16 * mib}); err != nil {
		t.Fatal(err)
	}
	bigger := int64(48 * mib)
	v, err := s.Update(ctx, "t", "v", btrfsnode.UpdateRequest{SizeBytes: &bigger})
	if err != nil || v.SizeBytes != bigger {
		t.Fatalf("Update = %+v, %v", v, err)
	}
	if u, _ := s.FS.Usage(v.Path); u.Limit != bigger {
		t.Fatalf("quota limit %d after expansion, want %d", u.Limit, bigger)
	}
	smaller := int64(8 * mib)
	_, err = s.Update(ctx, "t", "v", btrfsnode.UpdateRequest{SizeBytes: &smaller})
	wantKind(t, err, contract.Invalid, "shrinking")
	lzo := "lzo"
	if v, err = s.Update(ctx, "t", "v", btrfsnode.UpdateRequest{Compression: &lzo}); err != nil || v.Compression != "lzo" {
		t.Fatalf("retune to lzo: %+v, %v", v, err)
	}
	if v, _ = s.Get("t", "v"); v.SizeBytes != bigger || v.Compression != "lzo" {
		t.Fatalf("stored volume %+v lost an update", v)
	}
}

func TestBadRequestsAreRefusedAndChangeNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	for _, tc := range []struct {
		req  btrfsnode.CreateRequest
		kind contract.Kind
		says string
	}{
		{btrfsnode.CreateRequest{Name: "a/../../escape", SizeBytes: 16 * mib}, contract.Invalid, `"/" at byte 1`},
		{btrfsnode.CreateRequest{Name: "..", SizeBytes: 16 * mib}, contract.Invalid, "starts with a dot"},
		{btrfsnode.CreateRequest{Name: "a\x00b", SizeBytes: 16 * mib}, contract.Invalid, "use only letters"},
		{btrfsnode.CreateRequest{Name: `a"b`, SizeBytes: 16 * mib}, contract.Invalid, "use only letters"},
		{btrfsnode.CreateRequest{Name: "snapshots", SizeBytes: 16 * mib}, contract.Invalid, "reserved"},
		{btrfsnode.CreateRequest{Name: strings.Repeat("x", 129), SizeBytes: 16 * mib}, contract.Invalid, "limit is 128"},
		{btrfsnode.CreateRequest{Name: "tiny", SizeBytes: 1024}, contract.Invalid, "below the minimum"},
		{btrfsnode.CreateRequest{Name: "huge", SizeBytes: 1 << 40}, contract.NoSpace, "free"},
		{btrfsnode.CreateRequest{Name: "z", SizeBytes: 16 * mib, Tuning: btrfsnode.Tuning{Compression: "zstd", CompressionLevel: 22}}, contract.Invalid, "1-15"},
		{btrfsnode.CreateRequest{Name: "z", SizeBytes: 16 * mib, Tuning: btrfsnode.Tuning{Compression: "brotli"}}, contract.Invalid, "zstd, lzo or zlib"},
		{btrfsnode.CreateRequest{Name: "z", SizeBytes: 16 * mib, Tuning: btrfsnode.Tuning{Compression: "zlib", NoCOW: true}}, contract.Invalid, "pick one"},
		{btrfsnode.CreateRequest{Name: "z", SizeBytes: 16 * mib, Tuning: btrfsnode.Tuning{Mode: "rwx"}}, contract.Invalid, "octal"},
	} {
		_, _, err := s.Create(ctx, "t", tc.req)
		wantKind(t, err, tc.kind, fmt.Sprintf("Create(%q)", tc.req.Name))
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Create(%q): %q does not say %q", tc.req.Name, err, tc.says)
		}
	}
	if vs, err := s.List("t"); err != nil || len(vs) != 0 {
		t.Fatalf("after refused creates List = %+v, %v; want nothing", vs, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(s.Base)); len(entries) != 1 {
		t.Fatalf("the filesystem holds %v besides the store", entries)
	}
	_, _, err := s.CreateSnapshot(ctx, "t", btrfsnode.SnapshotRequest{Name: "s", Volume: "missing"})
	wantKind(t, err, contract.NotFound, "a snapshot of a missing volume")
}

func TestConcurrentCreatesOfOneNameMakeOneVolume(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	made, same, conflicts := 0, 0, 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			size := int64(16 * mib)
			if i%2 == 1 {
				size = 32 * mib
			}
			v, created, err := s.Create(ctx, "t", btrfsnode.CreateRequest{Name: "shared", SizeBytes: size})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case created:
				made++
			case err == nil && v.SizeBytes == size:
				same++
			case contract.KindOf(err) == contract.Conflict:
				conflicts++
			default:
				t.Errorf("Create: %+v, %v", v, err)
			}
		}()
	}
	wg.Wait()
	if made != 1 || same != 3 || conflicts != 4 {
		t.Fatalf("made %d, same %d, conflicts %d; want 1 made, 3 of its size returned, 4 of the other size refused", made, same, conflicts)
	}
	if vs, _ := s.List("t"); len(vs) != 1 {
		t.Fatalf("List = %+v, want one volume", vs)
	}
}

func TestSnapshotsClonesAndCascadingDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	v, _, err := s.Create(ctx, "t", btrfsnode.CreateRequest{Name: "v", SizeBytes: 16 * mib})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Path, "f"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, created, err := s.CreateSnapshot(ctx, "t", btrfsnode.SnapshotRequest{Name: "s1", Volume: "v"})
	if err != nil || !created || snap.SizeBytes != 16*mib {
		t.Fatalf("CreateSnapshot = %+v, %v, %v", snap, created, err)
	}
	if _, _, err := s.CreateSnapshot(ctx, "t", btrfsnode.SnapshotRequest{Name: "s1", Volume: "v"}); err != nil {
		t.Fatalf("repeated CreateSnapshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(snap.Path, "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("a snapshot was writable")
	}
	clone, _, err := s.Clone(ctx, "t", btrfsnode.CloneRequest{Name: "c", Source: btrfsnode.Source{Snapshot: "s1"}, SizeBytes: 32 * mib})
	if err != nil || clone.SizeBytes != 32*mib {
		t.Fatalf("Clone = %+v, %v", clone, err)
	}
	if data, _ := os.ReadFile(filepath.Join(clone.Path, "f")); string(data) != "one" {
		t.Fatalf("the clone holds %q, want the snapshot's data", data)
	}
	if _, _, err := s.Clone(ctx, "t", btrfsnode.CloneRequest{Name: "small", Source: btrfsnode.Source{Volume: "v"}, SizeBytes: 8 * mib}); contract.KindOf(err) != contract.Invalid {
		t.Fatalf("a clone smaller than its source: %v", err)
	}
	if snaps, _ := s.ListSnapshots("t", "v"); len(snaps) != 1 {
		t.Fatalf("ListSnapshots = %+v", snaps)
	}
	err = s.Delete(ctx, "t", "v", false)
	wantKind(t, err, contract.InUse, "deleting a volume with a snapshot")
	if !strings.Contains(err.Error(), "s1") {
		t.Fatalf("%q does not name the snapshot", err)
	}
	if err := s.Delete(ctx, "t", "v", true); err != nil {
		t.Fatalf("cascading delete: %v", err)
	}
	_, err = s.GetSnapshot("t", "s1")
	wantKind(t, err, contract.NotFound, "the snapshot after a cascading delete")
	_, _, err = s.Clone(ctx, "t", btrfsnode.CloneRequest{Name: "c2", Source: btrfsnode.Source{Snapshot: "s1"}})
	wantKind(t, err, contract.NotFound, "a clone of a deleted snapshot")
	if vs, _ := s.List("t"); len(vs) != 1 || vs[0].Name != "c" {
		t.Fatalf("List = %+v, want only the clone", vs)
	}
	wantKind(t, s.Delete(ctx, "t", "v", false), contract.NotFound, "deleting again")
}

func TestExportsAreServedAndComeBackAfterARestart(t *testing.T) {
	testenv.NeedTools(t, "ganesha.nfsd", "nfs-cat")
	ctx := context.Background()
	addr := testenv.FreeAddr(t)
	g, err := nfs.StartGanesha(ctx, t.TempDir(), addr)
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, &g.Ganesha)
	v, _, err := s.Create(ctx, "t", btrfsnode.CreateRequest{Name: "shared", SizeBytes: 16 * mib})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Path, "hello"), []byte("through NFS"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err = s.AddExport(ctx, "t", "shared", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if v.ExportPath != "/t/shared" || v.ExportID == 0 {
		t.Fatalf("exported volume = %+v, want NFSv4 path /t/shared and an export ID", v)
	}
	waitNFSRead(t, addr, v.ExportPath+"/hello", "through NFS")
	err = s.Delete(ctx, "t", "shared", false)
	wantKind(t, err, contract.InUse, "deleting an exported volume")

	// The NFS server restarts with no exports, and so does the agent.
	g.Stop()
	if err := os.Remove(g.ExportsFile); err != nil {
		t.Fatal(err)
	}
	g, err = nfs.StartGanesha(ctx, filepath.Dir(g.ExportsFile), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	restarted, err := btrfsnode.Open(ctx, s.Base, &g.Ganesha, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go restarted.Run(runCtx, time.Hour, []string{"t"}, testr.New(t))
	waitNFSRead(t, addr, v.ExportPath+"/hello", "through NFS")

	if _, err := restarted.RemoveExport(ctx, "t", "shared", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	// An agent's first export change may come before its first sync.
	again, err := btrfsnode.Open(ctx, s.Base, &g.Ganesha, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	reexported, err := again.AddExport(ctx, "t", "shared", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if reexported.ExportID != v.ExportID {
		t.Fatalf("export ID %d after exporting again, want the volume's own %d", reexported.ExportID, v.ExportID)
	}
	waitNFSRead(t, addr, v.ExportPath+"/hello", "through NFS")
	if _, err := again.RemoveExport(ctx, "t", "shared", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := again.Delete(ctx, "t", "shared", false); err != nil {
		t.Fatalf("deleting the volume once its export is gone: %v", err)
	}
	if have, _ := g.Exported(ctx); len(have) != 0 {
		t.Fatalf("exports left: %+v", have)
	}
}

func waitNFSRead(t *testing.T, addr, path, want string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	url := fmt.Sprintf("nfs://127.0.0.1%s?version=4&nfsport=%s", path, port)
	testenv.Eventually(t, 20*time.Second, func() error {
		out, err := exec.Command("nfs-cat", url).CombinedOutput()
		if err != nil || string(out) != want {
			return fmt.Errorf("nfs-cat %s: %q, %v", url, out, err)
		}
		return nil
	})
}

func TestConcurrentExportsAreAllServedWithTheirOwnIDs(t *testing.T) {
	testenv.NeedTools(t, "ganesha.nfsd")
	ctx := context.Background()
	g, err := nfs.StartGanesha(ctx, t.TempDir(), testenv.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, &g.Ganesha)
	t.Cleanup(g.Stop) // before the disk goes: Ganesha holds its exports
	const n = 12
	for i := range n {
		if _, _, err := s.Create(ctx, "t", btrfsnode.CreateRequest{Name: fmt.Sprintf("v%d", i), SizeBytes: 16 * mib}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.AddExport(ctx, "t", fmt.Sprintf("v%d", i), "127.0.0.1"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	have, err := g.Exported(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint16]bool{}
	for _, e := range have {
		ids[e.ID] = true
	}
	if len(have) != n || len(ids) != n {
		t.Fatalf("Ganesha serves %d exports with %d distinct IDs, want %d of each: %+v", len(have), len(ids), n, have)
	}
}
