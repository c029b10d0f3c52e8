package btrfsnode_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/contract"
)

// A crash between creating the subvolume and writing its metadata leaves
// a directory nobody sees; the next start moves it to quarantine, whole
// with its subvolume, and the name is free again.
func TestRestartAfterACrashInCreate(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	half := filepath.Join(s.Base, "t", "v")
	if err := os.MkdirAll(half, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.FS.CreateSubvolume(ctx, filepath.Join(half, "data")); err != nil {
		t.Fatal(err)
	}
	halfSnap := filepath.Join(s.Base, "t", "snapshots", "s")
	if err := os.MkdirAll(halfSnap, 0o700); err != nil {
		t.Fatal(err)
	}
	if vs, _ := s.List("t"); len(vs) != 0 {
		t.Fatalf("List shows the half-made volume: %+v", vs)
	}
	_, err := s.Get("t", "v")
	wantKind(t, err, contract.NotFound, "Get of a half-made volume")

	restarted, err := btrfsnode.Open(ctx, s.Base, nil, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	restarted.Notice = func(reason, message string) { notices = append(notices, reason+": "+message) }
	if err := restarted.Sweep(ctx, []string{"t"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{half, halfSnap} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after the sweep: %v", p, err)
		}
	}
	moved, _ := filepath.Glob(filepath.Join(s.Base, ".quarantine", "*", "t", "v", "data"))
	if len(moved) != 1 {
		t.Fatalf("the half-made volume is not in quarantine: %v", moved)
	}
	if len(notices) != 2 || !strings.Contains(notices[0], "Quarantined: "+half) {
		t.Fatalf("notices = %q, want one for each of %s and %s", notices, half, halfSnap)
	}
	if _, created, err := restarted.Create(ctx, "t", btrfsnode.CreateRequest{Name: "v", SizeBytes: 16 * mib}); err != nil || !created {
		t.Fatalf("Create after the sweep: %v, %v", created, err)
	}
}

// The sweep touches only what the store could have made: configured
// tenants, names that pass the name rules, never a dot-directory.
func TestSweepLeavesWhatIsNotTheStoresAlone(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	keep := []string{
		filepath.Join(s.Base, "t", ".snapshots", "1", "snapshot"), // snapper's
		filepath.Join(s.Base, "t", "not a volume", "file"),
		filepath.Join(s.Base, "t", "snapshots", ".hidden", "file"),
		filepath.Join(s.Base, "other-tenant", "v", "file"), // a tenant not configured (any more)
		filepath.Join(s.Base, ".keep", "x", "file"),
	}
	for _, p := range keep {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("user data"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sweep(ctx, []string{"t"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range keep {
		if data, err := os.ReadFile(p); err != nil || string(data) != "user data" {
			t.Errorf("%s after the sweep: %q, %v", p, data, err)
		}
	}
}

// A base that already holds files and no marker is not the store's: it
// is refused, and nothing in it changes.
func TestOpenRefusesABaseThatIsNotTheStores(t *testing.T) {
	ctx := context.Background()
	testenv.NeedRoot(t, "btrfs on a loop device")
	mnt := testenv.BtrfsDisk(t, 1<<30)
	home := filepath.Join(mnt, "home")
	user := filepath.Join(home, "alice", "thesis")
	if err := os.MkdirAll(user, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := btrfsnode.Open(ctx, home, nil, "node-a")
	if err == nil || !strings.Contains(err.Error(), home) || !strings.Contains(err.Error(), btrfsnode.MarkerFile) {
		t.Fatalf("Open of a base with someone's files = %v, want an error naming %s and the marker", err, home)
	}
	if _, err := os.Stat(filepath.Join(home, btrfsnode.MarkerFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused base got a marker: %v", err)
	}
	if _, err := os.Stat(user); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(mnt, "strata")
	if _, err := btrfsnode.Open(ctx, fresh, nil, "node-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(fresh, btrfsnode.MarkerFile)); err != nil {
		t.Fatalf("a new base has no marker: %v", err)
	}
	if _, err := btrfsnode.Open(ctx, fresh, nil, "node-a"); err != nil {
		t.Fatalf("opening the store's own base again: %v", err)
	}
}
