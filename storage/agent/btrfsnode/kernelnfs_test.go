package btrfsnode_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/strata-gitops/strata/internal/testing/guest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/nfs"
)

// TestKernelExportsToAnotherNode serves a volume through the kernel's NFS
// server in the test guest to a client in a second guest on a network of
// their own (internal/testing/guest): the client mounts it, writes and
// reads, and every file it makes belongs to the volume's owner
// (all_squash); a volume exported to another address only cannot be
// mounted; an export is gone once taken away, and an agent started
// again removes an export its records no longer hold.
func TestKernelExportsToAnotherNode(t *testing.T) {
	if guest.Delegate(t, guest.Options{Peer: true}) {
		return
	}
	ctx := context.Background()
	mnt := testenv.BtrfsDisk(t, 1<<30)
	guest.StartNFSServer(t) // after the disk: stopped before it is unmounted
	base := filepath.Join(mnt, "strata")
	s, err := btrfsnode.Open(ctx, base, nfs.NewKernel(base), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	owner := 1234
	createWith(t, s, "shared", owner, "from the server")
	private := createWith(t, s, "private", owner, "secret")
	client := guest.PeerAddress
	shared, err := s.AddExport(ctx, "t", "shared", client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = s.AddExport(ctx, "t", "private", "10.0.3.99"); err != nil {
		t.Fatal(err)
	}

	t.Run("the client mounts, reads and writes as the volume's owner", func(t *testing.T) {
		out := peerMount(t, shared.ExportPath, "/mnt/shared", 0)
		if !strings.Contains(out, "from the server") {
			t.Fatalf("the client read %q, want the server's file", out)
		}
		peer(t, "echo from the client > /mnt/shared/client && cat /mnt/shared/client", 0)
		info, err := os.Stat(filepath.Join(shared.Path, "client"))
		if err != nil {
			t.Fatal(err)
		}
		if uid, gid := ownerOf(info); uid != owner || gid != owner {
			t.Fatalf("the client's root made a file owned by %d:%d, want the volume's owner %d (all_squash)", uid, gid, owner)
		}
	})
	t.Run("a client not on the export list is refused", func(t *testing.T) {
		peerMount(t, s.Exporter.MountPath(exportOf(private)), "/mnt/private", 32)
	})
	t.Run("an export taken away cannot be mounted again", func(t *testing.T) {
		peer(t, "umount /mnt/shared", 0)
		if _, err := s.RemoveExport(ctx, "t", "shared", client); err != nil {
			t.Fatal(err)
		}
		peerMount(t, shared.ExportPath, "/mnt/shared", 32)
	})
	t.Run("an agent started again removes an export its records do not hold", func(t *testing.T) {
		// As if the agent stopped after recording the removal and before
		// the server heard of it.
		opts := fmt.Sprintf("rw,no_subtree_check,all_squash,anonuid=%d,anongid=%d,fsid=77", owner, owner)
		if out, err := exec.Command("exportfs", "-i", "-o", opts, client+":"+shared.Path).CombinedOutput(); err != nil {
			t.Fatalf("exportfs: %v: %s", err, out)
		}
		peerMount(t, shared.ExportPath, "/mnt/shared", 0)
		peer(t, "umount /mnt/shared", 0)
		again, err := btrfsnode.Open(ctx, base, nfs.NewKernel(base), "node-a")
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		go again.Run(runCtx, time.Hour, []string{"t"}, testr.New(t))
		testenv.Eventually(t, 30*time.Second, func() error {
			if _, code := guest.PeerRun(t, mountCommand(shared.ExportPath, "/mnt/shared")); code == 0 {
				guest.PeerRun(t, "umount /mnt/shared")
				return fmt.Errorf("the client still mounts %s", shared.ExportPath)
			}
			return nil
		})
	})
	t.Run("an export is gone with its volume", func(t *testing.T) {
		if _, err := s.RemoveExport(ctx, "t", "private", "10.0.3.99"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "t", "private", false); err != nil {
			t.Fatal(err)
		}
		have, err := s.Exporter.Exported(ctx)
		if err != nil || len(have) != 0 {
			t.Fatalf("exports after every volume's export went: %+v, %v", have, err)
		}
	})
}

// createWith makes a volume owned by uid:uid holding a file "hello".
func createWith(t *testing.T, s *btrfsnode.Store, name string, uid int, hello string) btrfsnode.Volume {
	t.Helper()
	v, _, err := s.Create(context.Background(), "t", btrfsnode.CreateRequest{Name: name, SizeBytes: 16 * mib,
		Tuning: btrfsnode.Tuning{UID: &uid, GID: &uid, Mode: "0770"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Path, "hello"), []byte(hello), 0o644); err != nil {
		t.Fatal(err)
	}
	return v
}

func exportOf(v btrfsnode.Volume) nfs.Export {
	return nfs.Export{ID: v.ExportID, Path: v.Path}
}

func mountCommand(path, at string) string {
	return fmt.Sprintf("mkdir -p %s && mount -t nfs4 -o vers=4.2,soft,timeo=50,retrans=1 10.0.3.1:%s %s && cat %s/hello", at, path, at, at)
}

// peerMount mounts an export on the client guest and reads its hello
// file; want is mount's exit code (32: the mount failed).
func peerMount(t *testing.T, path, at string, want int) string {
	t.Helper()
	return peer(t, mountCommand(path, at), want)
}

func peer(t *testing.T, command string, want int) string {
	t.Helper()
	out, code := guest.PeerRun(t, command)
	if code != want {
		t.Fatalf("on the client, %q exited %d, want %d:\n%s", command, code, want, out)
	}
	return out
}

func ownerOf(info os.FileInfo) (int, int) {
	st := info.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}
