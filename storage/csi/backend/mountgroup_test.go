package backend

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// TestMountGroupIsAppliedAsKubeletWould checks the fsGroup the node
// service applies with VOLUME_MOUNT_GROUP: the whole tree of an LVM
// volume, as kubelet would have, and only the root of an NFS-served one.
func TestMountGroupIsAppliedAsKubeletWould(t *testing.T) {
	testenv.NeedRoot(t, "changing file groups")
	for _, recursive := range []bool{true, false} {
		root := t.TempDir()
		if err := os.Chmod(root, 0o700); err != nil {
			t.Fatal(err)
		}
		sub, file, link := filepath.Join(root, "sub"), filepath.Join(root, "sub", "data"), filepath.Join(root, "link")
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/passwd", link); err != nil {
			t.Fatal(err)
		}
		if err := ApplyMountGroup(root, "4321", recursive); err != nil {
			t.Fatal(err)
		}
		want := map[string]struct {
			gid  uint32
			mode uint32
		}{root: {4321, 0o2770}}
		if recursive {
			want[sub] = struct{ gid, mode uint32 }{4321, 0o2770}
			want[file] = struct{ gid, mode uint32 }{4321, 0o660}
		} else {
			want[sub] = struct{ gid, mode uint32 }{0, 0o700}
			want[file] = struct{ gid, mode uint32 }{0, 0o600}
		}
		for path, w := range want {
			var st unix.Stat_t
			if err := unix.Stat(path, &st); err != nil {
				t.Fatal(err)
			}
			if st.Gid != w.gid || st.Mode&0o7777 != w.mode {
				t.Errorf("recursive=%v: %s has group %d, mode %o; want group %d, mode %o", recursive, path, st.Gid, st.Mode&0o7777, w.gid, w.mode)
			}
		}
		var target unix.Stat_t
		if err := unix.Stat("/etc/passwd", &target); err != nil || target.Gid == 4321 {
			t.Fatalf("a symlink's target was given the group: %v", err)
		}
	}
	if err := ApplyMountGroup(t.TempDir(), "staff", true); err == nil {
		t.Error("a group that is not a number was taken")
	}
}
