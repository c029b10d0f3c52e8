package backend

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// bindMount is `mount --bind` (then a read-only remount, as mount(8) does
// for -o bind,ro) made with the system calls themselves: a publish is
// nothing else, and a process per publish is most of its cost.
func BindMount(source, target string, readOnly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		_ = unix.Unmount(target, 0)
		return fmt.Errorf("making the bind mount read-only: %w", err)
	}
	return nil
}

// filesystemStats are the bytes and inodes of the filesystem at path, as
// this node sees it.
func FilesystemStats(path string) (*csi.NodeGetVolumeStatsResponse, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", path, err)
	}
	blockSize := fs.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * blockSize, Available: int64(fs.Bavail) * blockSize,
			Used: int64(fs.Blocks-fs.Bfree) * blockSize},
		{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree), Used: int64(fs.Files - fs.Ffree)},
	}}, nil
}

func IsReadOnlyMode(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY || m == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}

// applyMountGroup gives a pod's fsGroup the volume, as kubelet does for a
// driver without VOLUME_MOUNT_GROUP: each file and directory belongs to the
// group and is group-readable and -writable, and directories are setgid
// so that new files belong to the group too. Kubelet leaves this to the
// driver once it offers VOLUME_MOUNT_GROUP. Without recursive only the
// root changes: an NFS-served tree is not walked at every mount, and its
// existing files keep their owners.
func ApplyMountGroup(root, group string, recursive bool) error {
	if group == "" {
		return nil
	}
	gid, err := strconv.Atoi(group)
	if err != nil || gid < 0 {
		return status.Errorf(codes.InvalidArgument, "volume mount group %q is not a group ID", group)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if err := giveGroup(path, gid, d.IsDir()); err != nil {
			return err
		}
		if d.IsDir() && !recursive {
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return status.Errorf(codes.Internal, "giving group %d the volume at %s: %v", gid, root, err)
	}
	return nil
}

// giveGroup makes one file or directory the group's, read-write (and
// searchable and setgid for a directory), as kubelet's fsGroup does.
func giveGroup(path string, gid int, dir bool) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	if int(st.Gid) != gid {
		if err := os.Lchown(path, -1, gid); err != nil {
			return err
		}
	}
	mode := st.Mode&0o7777 | 0o660
	if dir {
		mode |= 0o2110
	}
	if mode != st.Mode&0o7777 || int(st.Gid) != gid { // chown clears setgid on files
		return unix.Chmod(path, mode)
	}
	return nil
}
