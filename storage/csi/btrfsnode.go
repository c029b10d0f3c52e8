package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-gitops/strata/internal/mountinfo"
)

// stageBtrfs mounts a btrfs volume at the staging path: the subvolume
// itself by bind mount when the agent is on this node (no NFS hop), its
// NFS export otherwise. Where to find it is in the publish context that
// ControllerPublishVolume returned.
func (b btrfsNode) stage(_ context.Context, req *csi.NodeStageVolumeRequest) error {
	n := b.n
	if err := btrfsCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return err
	}
	staging, pc := req.GetStagingTargetPath(), req.GetPublishContext()
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return status.Errorf(codes.Internal, "staging path %s: %v", staging, err)
	}
	if mounted, err := n.Mounter.IsMountPoint(staging); err != nil {
		return status.Errorf(codes.Internal, "checking mounts at %s: %v", staging, err)
	} else if mounted {
		return nil
	}
	if local := pc[publishPath]; pc[publishNode] == n.Name && local != "" && n.BtrfsBase != "" {
		if err := checkUnder(n.BtrfsBase, local); err != nil {
			return status.Errorf(codes.PermissionDenied, "volume %s: refusing to bind-mount %s: %v", req.GetVolumeId(), local, err)
		}
		if _, err := os.Stat(local); err == nil {
			if err := bindMount(local, staging, false); err != nil {
				return status.Errorf(codes.Internal, "bind-mounting %s's subvolume %s at %s: %v", req.GetVolumeId(), local, staging, err)
			}
			return nil
		}
	}
	server, export := pc[publishNFSServer], pc[publishExportPath]
	if server == "" || export == "" {
		return status.Errorf(codes.FailedPrecondition, "volume %s has no NFS export for this node: ControllerPublishVolume exports it first", req.GetVolumeId())
	}
	source := server + ":" + export
	options := append([]string{"vers=4.1", "hard"}, req.GetVolumeCapability().GetMount().GetMountFlags()...)
	if err := n.Mounter.Mount(source, staging, "nfs4", options); err != nil {
		return status.Errorf(codes.Internal, "mounting %s's export %s at %s: %v", req.GetVolumeId(), source, staging, err)
	}
	return nil
}

// stats are the figures of the volume's filesystem as this node sees it.
func (btrfsNode) stats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	return filesystemStats(req.GetVolumePath())
}

// expand has nothing to do: the agent's quota is all there is to grow.
func (btrfsNode) expand(context.Context, *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	return &csi.NodeExpandVolumeResponse{}, nil
}

// checkUnder refuses a path that is not a subvolume's data directory
// under base, symbolic links resolved: the path comes from the agent's
// answer, and a forged one must not get a host directory mounted into a
// pod.
func checkUnder(base, path string) error {
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return fmt.Errorf("the btrfs base %s: %w", base, err)
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		real, err = filepath.Clean(path), nil
	}
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(realBase, real)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") || !filepath.IsAbs(path) || filepath.Base(real) != dataDirName {
		return fmt.Errorf("it is not a volume's %s directory under the btrfs base %s (--btrfs-base)", dataDirName, base)
	}
	return nil
}

// dataDirName is the last element of every volume's path on the agent.
const dataDirName = "data"

// publishBtrfs bind-mounts the staged volume at the target path,
// read-only when asked, with the pod's fsGroup given the volume's root.
func (b btrfsNode) publish(_ context.Context, req *csi.NodePublishVolumeRequest) error {
	n := b.n
	capability := req.GetVolumeCapability()
	if err := btrfsCapabilities([]*csi.VolumeCapability{capability}); err != nil {
		return err
	}
	staging, target := req.GetStagingTargetPath(), req.GetTargetPath()
	if staged, err := n.Mounter.IsMountPoint(staging); err != nil || !staged {
		return status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s: call NodeStageVolume first", req.GetVolumeId(), staging)
	}
	if err := applyMountGroup(staging, capability.GetMount().GetVolumeMountGroup(), false); err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return status.Errorf(codes.Internal, "target path %s: %v", target, err)
	}
	if mounted, err := n.Mounter.IsMountPoint(target); err != nil {
		return status.Errorf(codes.Internal, "target path %s: %v", target, err)
	} else if mounted {
		return nil
	}
	readOnly := req.GetReadonly() || isReadOnlyMode(capability.GetAccessMode().GetMode())
	if err := bindMount(staging, target, readOnly); err != nil {
		return status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", staging, target, err)
	}
	return nil
}

func isReadOnlyMode(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY || m == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}

// applyMountGroup gives a pod's fsGroup the volume, as kubelet does for a
// driver without VOLUME_MOUNT_GROUP: each file and directory belongs to the
// group and is group-readable and -writable, and directories are setgid
// so that new files belong to the group too. Kubelet leaves this to the
// driver once it offers VOLUME_MOUNT_GROUP. Without recursive only the
// root changes: an NFS-served tree is not walked at every mount, and its
// existing files keep their owners.
func applyMountGroup(root, group string, recursive bool) error {
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

// isBtrfsMount says whether the volume at path is a btrfs-backend
// volume: an LVM volume is ext4, xfs or a device, never btrfs or NFS.
// A btrfs volume must be the one mounted there (NotFound otherwise),
// which the mount table tells: the subvolume's path, or the export's,
// ends in the volume's name.
func isBtrfsMount(volumeID, path string) (bool, error) {
	if err := required("volume ID", volumeID, "volume path", path); err != nil {
		return false, err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, status.Errorf(codes.NotFound, "volume path %s does not exist", path)
		}
		return false, status.Errorf(codes.Internal, "statfs %s: %v", path, err)
	}
	if fs.Type != unix.BTRFS_SUPER_MAGIC && fs.Type != unix.NFS_SUPER_MAGIC {
		return false, nil
	}
	id, err := ParseVolumeID(volumeID)
	if err != nil {
		return true, status.Error(codes.NotFound, err.Error())
	}
	points, err := mountinfo.Read()
	if err != nil {
		return true, status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	for _, p := range points {
		if p.MountPoint == filepath.Clean(path) &&
			(strings.HasSuffix(p.Root, "/"+id.Name+"/data") || strings.HasSuffix(p.Source, "/"+id.Name)) {
			return true, nil
		}
	}
	return true, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", volumeID, path)
}
