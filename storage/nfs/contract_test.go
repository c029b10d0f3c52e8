package nfs_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/guest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/btrfs"
	"github.com/strata-gitops/strata/storage/nfs"
)

// server is an exporter under test and a client that reads a file
// through NFS from the host it exports on.
type server struct {
	nfs.Exporter
	read func(ctx context.Context, mountPath, file string) (string, error)
}

// testExporter runs the contract every Exporter keeps, on subvolumes of mnt:
// a real btrfs the caller mounts before starting the server, so that the
// server stops before mnt is unmounted (cleanups run last-registered first,
// and a live server keeps mnt busy).
func testExporter(t *testing.T, mnt string, s server) {
	ctx := context.Background()
	fs, err := btrfs.Open(ctx, mnt)
	if err != nil {
		t.Fatal(err)
	}
	var exports []nfs.Export
	for i, name := range []string{"one", "two"} {
		path := filepath.Join(mnt, name)
		if err := fs.CreateSubvolume(ctx, path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "hello"), []byte("hello from "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		exports = append(exports, nfs.Export{ID: uint16(10 + i), Path: path, Pseudo: "/t/" + name, Clients: []string{"127.0.0.1"}})
	}
	t.Cleanup(func() { _ = s.Sync(ctx, nil) })

	t.Run("exports serve the subvolume's files", func(t *testing.T) {
		if err := s.Sync(ctx, exports); err != nil {
			t.Fatal(err)
		}
		for _, e := range exports {
			waitRead(t, s, e, "hello from "+filepath.Base(e.Path))
		}
		have, err := s.Exported(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := paths(have); !slices.Equal(got, []string{exports[0].Path, exports[1].Path}) {
			t.Fatalf("Exported = %v, want both exports", got)
		}
	})

	t.Run("sync is idempotent and adds a client in place", func(t *testing.T) {
		exports[0].Clients = []string{"127.0.0.1", "10.9.8.0/24"}
		for range 2 {
			if err := s.Sync(ctx, exports); err != nil {
				t.Fatal(err)
			}
		}
		have, _ := s.Exported(ctx)
		if len(have) != 2 || !slices.Equal(have[0].Clients, []string{"10.9.8.0/24", "127.0.0.1"}) {
			t.Fatalf("Exported = %+v, want two exports, the first with two clients", have)
		}
		waitRead(t, s, exports[0], "hello from one")
	})

	t.Run("an export left out of the set is removed", func(t *testing.T) {
		if err := s.Sync(ctx, exports[1:]); err != nil {
			t.Fatal(err)
		}
		have, _ := s.Exported(ctx)
		if got := paths(have); !slices.Equal(got, []string{exports[1].Path}) {
			t.Fatalf("Exported = %v, want only %s", got, exports[1].Path)
		}
		waitUnreadable(t, s, exports[0])
		// The subvolume is free again: nothing holds it mounted.
		if err := fs.DeleteSubvolume(ctx, exports[0].Path); err != nil {
			t.Fatalf("deleting a subvolume whose export was removed: %v", err)
		}
	})

	testRefusals(t, s, mnt, fs, exports)
}

// testRefusals is the contract's half on what is not served: bad exports
// one by one, and clients not named.
func testRefusals(t *testing.T, s server, mnt string, fs *btrfs.Filesystem, exports []nfs.Export) {
	ctx := context.Background()
	t.Run("a bad export is refused alone and the rest are served", func(t *testing.T) {
		for _, bad := range []nfs.Export{
			{ID: 0, Path: filepath.Join(mnt, "zero"), Pseudo: "/x", Clients: []string{"127.0.0.1"}},
			{ID: 5, Path: filepath.Join(mnt, "host"), Pseudo: "/x", Clients: []string{"not a host"}},
			{ID: exports[1].ID, Path: filepath.Join(mnt, "zz"), Pseudo: "/y", Clients: []string{"127.0.0.1"}},
			{ID: 6, Path: filepath.Join(mnt, `a"b`), Pseudo: `/t/a"b`, Clients: []string{"127.0.0.1"}},
			{ID: 7, Path: filepath.Join(mnt, "a b"), Pseudo: "/t/a b", Clients: []string{"127.0.0.1"}},
			{ID: 8, Path: filepath.Join(mnt, "missing"), Pseudo: "/t/missing", Clients: []string{"127.0.0.1"}},
		} {
			err := s.Sync(ctx, []nfs.Export{exports[1], bad})
			if nfs.RefusedFor(err, bad.Path) == nil || nfs.RefusedFor(err, exports[1].Path) != nil {
				t.Fatalf("Sync with the bad export %+v = %v, want that one refused and the good one served", bad, err)
			}
			waitRead(t, s, exports[1], "hello from two")
		}
		have, _ := s.Exported(ctx)
		if got := paths(have); !slices.Equal(got, []string{exports[1].Path}) {
			t.Fatalf("Exported = %v, want only the good export", got)
		}
	})

	t.Run("a client not published to cannot read", func(t *testing.T) {
		other := exports[0]
		other.Clients = []string{"10.9.8.7"}
		if err := fs.CreateSubvolume(ctx, other.Path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other.Path, "hello"), []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(ctx, []nfs.Export{exports[1], other}); err != nil {
			t.Fatal(err)
		}
		waitRead(t, s, exports[1], "hello from two")
		if got, err := s.read(ctx, s.MountPath(other), "hello"); err == nil {
			t.Fatalf("127.0.0.1 read %q from an export for 10.9.8.7 only", got)
		}
	})
}

func paths(exports []nfs.Export) []string {
	var out []string
	for _, e := range exports {
		out = append(out, e.Path)
	}
	return out
}

// waitRead polls until the file reads back: a server may apply a change
// a moment after it is told.
func waitRead(t *testing.T, s server, e nfs.Export, want string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() error {
		got, err := s.read(context.Background(), s.MountPath(e), "hello")
		if err == nil && got != want {
			err = fmt.Errorf("read %q, want %q", got, want)
		}
		return err
	})
}

func waitUnreadable(t *testing.T, s server, e nfs.Export) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() error {
		if _, err := s.read(context.Background(), s.MountPath(e), "hello"); err == nil {
			return fmt.Errorf("the removed export %s still serves its files", e.Pseudo)
		}
		return nil
	})
}

func TestGanesha(t *testing.T) {
	testenv.NeedRoot(t, "NFS-Ganesha and btrfs")
	testenv.NeedTools(t, "ganesha.nfsd", "nfs-cat")
	mnt := testenv.BtrfsDisk(t, 512<<20)
	addr := testenv.FreeAddr(t)
	g, err := nfs.StartGanesha(context.Background(), t.TempDir(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(addr)
	testExporter(t, mnt, server{Exporter: &g.Ganesha, read: func(ctx context.Context, path, file string) (string, error) {
		url := fmt.Sprintf("nfs://127.0.0.1%s/%s?version=4&nfsport=%s", path, file, port)
		out, err := exec.CommandContext(ctx, "nfs-cat", url).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("nfs-cat %s: %v: %s", url, err, out)
		}
		return string(out), nil
	}})
}

// TestKernel runs the contract on the kernel's NFS server, in the test
// guest (internal/testing/guest), whose kernel has nfsd whatever the
// host's has; its client is the guest's own kernel.
func TestKernel(t *testing.T) {
	if guest.Delegate(t, guest.Options{}) {
		return
	}
	if !kernelHasNFS() {
		t.Fatal("the guest's kernel has no NFS (no nfsd and nfs4 in /proc/filesystems)")
	}
	// The server starts after the disk is mounted, so that it is
	// stopped, and lets go of the disk, before the disk is unmounted.
	mnt := testenv.BtrfsDisk(t, 512<<20)
	guest.StartNFSServer(t)
	testExporter(t, mnt, server{Exporter: nfs.NewKernel("/tmp"), read: func(ctx context.Context, path, file string) (string, error) {
		dir := t.TempDir()
		if out, err := exec.CommandContext(ctx, "mount", "-t", "nfs4", "127.0.0.1:"+path, dir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("mount -t nfs4 127.0.0.1:%s: %v: %s", path, err, out)
		}
		defer func() { _ = exec.Command("umount", dir).Run() }()
		data, err := os.ReadFile(filepath.Join(dir, file))
		return string(data), err
	}})
}

// kernelHasNFS says whether this kernel has the NFS server and client.
func kernelHasNFS() bool {
	data, err := os.ReadFile("/proc/filesystems")
	return err == nil && strings.Contains(string(data), "\tnfsd\n") && strings.Contains(string(data), "\tnfs4\n")
}
