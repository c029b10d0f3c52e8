package backend

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

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

// With OnRootMismatch a volume whose root already has the group keeps a
// file another group was given (kubelet's rule); with Always, or a root
// that does not match, every file gets the group again.
func TestMountGroupPolicy(t *testing.T) {
	testenv.NeedRoot(t, "changing file groups")
	for _, c := range []struct {
		policy    corev1.PodFSGroupChangePolicy
		rootFirst bool
		wantGID   uint32
	}{
		{corev1.FSGroupChangeOnRootMismatch, true, 99},
		{corev1.FSGroupChangeOnRootMismatch, false, 4321},
		{corev1.FSGroupChangeAlways, true, 4321},
	} {
		root := t.TempDir()
		file := filepath.Join(root, "data")
		if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if c.rootFirst {
			if err := ApplyMountGroup(root, "4321", true); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Lchown(file, -1, 99); err != nil { // a chgrp in the pod
			t.Fatal(err)
		}
		if err := ApplyMountGroupWithPolicy(root, "4321", c.policy); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(file, &st); err != nil {
			t.Fatal(err)
		}
		if st.Gid != c.wantGID {
			t.Errorf("%s, root matching before: %v: the file has group %d, want %d", c.policy, c.rootFirst, st.Gid, c.wantGID)
		}
	}
	if p := ChangePolicy(context.Background(), nil, map[string]string{PodNameKey: "p", PodNamespaceKey: "ns"}); p != corev1.FSGroupChangeAlways {
		t.Errorf("without a pod reader the policy is %s, want Always", p)
	}
}
