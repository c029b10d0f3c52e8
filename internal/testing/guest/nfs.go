package guest

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// StartNFSServer starts the kernel's NFS server in the guest, NFSv4 only
// (no rpcbind), as a node's nfs-server service would, with the shortest
// grace period the kernel takes so that a client's first open need not
// wait 90 seconds. It is stopped when the test ends: start it after what
// it exports is mounted, so that it lets go of that first.
func StartNFSServer(t testing.TB) {
	t.Helper()
	if !InGuest() {
		t.Fatal("guest.StartNFSServer runs in the test guest (guest.Delegate)")
	}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	run("mount", "-t", "nfsd", "nfsd", "/proc/fs/nfsd")
	for _, f := range []string{"nfsv4gracetime", "nfsv4leasetime"} {
		if err := os.WriteFile("/proc/fs/nfsd/"+f, []byte("10\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// As nfs-server.service does: the export table is made from
	// /etc/exports (empty here) before the server starts.
	run("exportfs", "-r")
	mountd := exec.Command("rpc.mountd", "--foreground", "--no-nfs-version", "3", "--no-udp")
	if err := mountd.Start(); err != nil {
		t.Fatal(err)
	}
	run("rpc.nfsd", "--no-nfs-version", "3", "--no-udp", "4")
	t.Cleanup(func() {
		_ = exec.Command("rpc.nfsd", "0").Run()
		_ = exec.Command("exportfs", "-ua").Run()
		_ = mountd.Process.Kill()
		_ = mountd.Wait()
		_ = exec.Command("umount", "/proc/fs/nfsd").Run()
	})
	// The server answers once its threads run.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile("/proc/fs/nfsd/threads"); err == nil && string(data) != "0\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the kernel's NFS server started no thread in 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
