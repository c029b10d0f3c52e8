package csi

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"
)

// stageBtrfs mounts a btrfs volume at the staging path: the subvolume
// itself by bind mount when the agent is on this node (no NFS hop), its
// NFS export otherwise. Where to find it is in the publish context that
// ControllerPublishVolume returned.
func (n *Node) stageBtrfs(req *csi.NodeStageVolumeRequest) error {
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
	if local := pc[publishPath]; pc[publishNode] == n.Name && local != "" {
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

// publishBtrfs bind-mounts the staged volume at the target path,
// read-only when asked, with the pod's fsGroup given the volume's root.
func (n *Node) publishBtrfs(req *csi.NodePublishVolumeRequest) error {
	capability := req.GetVolumeCapability()
	if err := btrfsCapabilities([]*csi.VolumeCapability{capability}); err != nil {
		return err
	}
	staging, target := req.GetStagingTargetPath(), req.GetTargetPath()
	if staged, err := n.Mounter.IsMountPoint(staging); err != nil || !staged {
		return status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s: call NodeStageVolume first", req.GetVolumeId(), staging)
	}
	if err := applyMountGroup(staging, capability.GetMount().GetVolumeMountGroup()); err != nil {
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

// applyMountGroup gives a pod's fsGroup the volume's root, as kubelet
// would for a driver without VOLUME_MOUNT_GROUP: owned by the group,
// group-writable, and setgid so that new files belong to the group too.
// Only the root changes: a volume's existing files keep their owners.
func applyMountGroup(root, group string) error {
	if group == "" {
		return nil
	}
	gid, err := strconv.Atoi(group)
	if err != nil || gid < 0 {
		return status.Errorf(codes.InvalidArgument, "volume mount group %q is not a group ID", group)
	}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return status.Errorf(codes.Internal, "volume root %s: %v", root, err)
	}
	if err := os.Lchown(root, -1, gid); err != nil {
		return status.Errorf(codes.Internal, "giving group %d the volume root %s: %v", gid, root, err)
	}
	if err := unix.Chmod(root, (st.Mode&0o7777)|0o2070); err != nil {
		return status.Errorf(codes.Internal, "making the volume root %s group-writable: %v", root, err)
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
	points, err := mount.ParseMountInfo("/proc/self/mountinfo")
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
