package btrfsbackend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"

	"github.com/strata-gitops/strata/internal/mountinfo"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// Node is the node side of btrfs volumes: it mounts a volume's export
// over NFS, or bind-mounts its subvolume when the volume is on this
// node's own agent, under Base.
type Node struct {
	Name string
	// Base is the local btrfs agent's base; a volume is bind-mounted from
	// this host only when its path is under it, else it is mounted over
	// NFS. Empty: always NFS.
	Base    string
	Mounter *mount.SafeFormatAndMount
}

// stageBtrfs mounts a btrfs volume at the staging path: the subvolume
// itself by bind mount when the agent is on this node (no NFS hop), its
// NFS export otherwise. Where to find it is in the publish context that
// ControllerPublishVolume returned.
func (b Node) Stage(_ context.Context, req *csi.NodeStageVolumeRequest) error {
	if err := btrfsCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return err
	}
	staging, pc := req.GetStagingTargetPath(), req.GetPublishContext()
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return status.Errorf(codes.Internal, "staging path %s: %v", staging, err)
	}
	if mounted, err := b.Mounter.IsMountPoint(staging); err != nil {
		return status.Errorf(codes.Internal, "checking mounts at %s: %v", staging, err)
	} else if mounted {
		return nil
	}
	if local := pc[publishPath]; pc[publishNode] == b.Name && local != "" && b.Base != "" {
		if err := checkUnder(b.Base, local); err != nil {
			return status.Errorf(codes.PermissionDenied, "volume %s: refusing to bind-mount %s: %v", req.GetVolumeId(), local, err)
		}
		if _, err := os.Stat(local); err == nil {
			// The volume's directory, not its data subvolume: the storage
			// host's NFS server has the subvolume bind-mounted onto itself,
			// and kubelet will not unstage a mount another one shares its
			// root with. Publish mounts the data below it.
			volumeDir := filepath.Dir(local)
			if err := backend.BindMount(volumeDir, staging, false); err != nil {
				return status.Errorf(codes.Internal, "bind-mounting %s's directory %s at %s: %v", req.GetVolumeId(), volumeDir, staging, err)
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
	if err := b.Mounter.Mount(source, staging, "nfs4", options); err != nil {
		return status.Errorf(codes.Internal, "mounting %s's export %s at %s: %v", req.GetVolumeId(), source, staging, err)
	}
	return nil
}

// stats are the figures of the volume's filesystem as this node sees it.
func (Node) Stats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	return backend.FilesystemStats(req.GetVolumePath())
}

// expand has nothing to do: the agent's quota is all there is to grow.
func (Node) Expand(context.Context, *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
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
func (b Node) Publish(_ context.Context, req *csi.NodePublishVolumeRequest) error {
	capability := req.GetVolumeCapability()
	if err := btrfsCapabilities([]*csi.VolumeCapability{capability}); err != nil {
		return err
	}
	staging, target := req.GetStagingTargetPath(), req.GetTargetPath()
	if staged, err := b.Mounter.IsMountPoint(staging); err != nil || !staged {
		return status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s: call NodeStageVolume first", req.GetVolumeId(), staging)
	}
	source, err := stagedData(req.GetVolumeId(), staging)
	if err != nil {
		return err
	}
	if err := backend.ApplyMountGroup(source, capability.GetMount().GetVolumeMountGroup(), false); err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return status.Errorf(codes.Internal, "target path %s: %v", target, err)
	}
	if mounted, err := b.Mounter.IsMountPoint(target); err != nil {
		return status.Errorf(codes.Internal, "target path %s: %v", target, err)
	} else if mounted {
		return nil
	}
	readOnly := req.GetReadonly() || backend.IsReadOnlyMode(capability.GetAccessMode().GetMode())
	if err := backend.BindMount(source, target, readOnly); err != nil {
		return status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", source, target, err)
	}
	return nil
}

// stagedData is where the staged volume's data is: the staging path for
// an NFS mount (the export is the data), its data directory for the
// volume's directory bind-mounted on the storage host. The mount table
// tells which, so that a user's own "data" directory is never taken for it.
func stagedData(volumeID, staging string) (string, error) {
	id, err := backend.ParseVolumeID(volumeID)
	if err != nil {
		return "", status.Error(codes.NotFound, err.Error())
	}
	points, err := mountinfo.Read()
	if err != nil {
		return "", status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	for _, p := range points {
		if p.MountPoint == filepath.Clean(staging) && strings.HasSuffix(p.Root, "/"+id.Name) {
			return filepath.Join(staging, dataDirName), nil
		}
	}
	return staging, nil
}

// IsMount says whether the volume at path is a btrfs-backend
// volume: an LVM volume is ext4, xfs or a device, never btrfs or NFS.
// A btrfs volume must be the one mounted there (NotFound otherwise),
// which the mount table tells: the subvolume's path, or the export's,
// ends in the volume's name.
func IsMount(volumeID, path string) (bool, error) {
	if err := backend.Required("volume ID", volumeID, "volume path", path); err != nil {
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
	id, err := backend.ParseVolumeID(volumeID)
	if err != nil {
		return true, status.Error(codes.NotFound, err.Error())
	}
	points, err := mountinfo.Read()
	if err != nil {
		return true, status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	for _, p := range points {
		if p.MountPoint == filepath.Clean(path) && (strings.HasSuffix(p.Root, "/"+id.Name+"/"+dataDirName) ||
			strings.HasSuffix(p.Root, "/"+id.Name) || strings.HasSuffix(p.Source, "/"+id.Name)) {
			return true, nil
		}
	}
	return true, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", volumeID, path)
}
