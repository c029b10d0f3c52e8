package lvmbackend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/storage/agent/nodeapi"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// defaultFSType formats a volume whose capability names no filesystem.
// StorageClasses made from an LVMCluster always name one.
const defaultFSType = "ext4"

// Agent is what the node service asks its node's agent.
type Agent interface {
	Volume(ctx context.Context, logicalVolume string) (*nodeapi.Volume, error)
}

// Node is the node side of LVM volumes: it asks the node's agent where
// a volume's device is, formats it if blank, mounts it at the staging
// path and bind-mounts it into pods.
type Node struct {
	Agent   Agent
	Mounter *mount.SafeFormatAndMount
	// Pods reads the pod a publish is for, for its fsGroupChangePolicy;
	// nil: Always.
	Pods client.Reader
}

// stage formats a filesystem volume if blank and mounts it at the staging
// path; a block volume needs nothing.
func (b Node) Stage(ctx context.Context, req *csi.NodeStageVolumeRequest) error {
	capability := req.GetVolumeCapability()
	vol, err := b.volumeFor(ctx, req.GetVolumeId(), capability)
	if err != nil {
		return err
	}
	if capability.GetBlock() != nil {
		return nil // a block volume is published as its device
	}
	staging := req.GetStagingTargetPath()
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return status.Errorf(codes.Internal, "staging path %s: %v", staging, err)
	}
	if mounted, err := b.mountedDevice(staging); err != nil {
		return err
	} else if mounted != "" {
		if !sameDevice(mounted, vol.Device) {
			return status.Errorf(codes.AlreadyExists, "staging path %s has %s mounted, not %s's device %s", staging, mounted, req.GetVolumeId(), vol.Device)
		}
		return nil
	}
	fstype := capability.GetMount().GetFsType()
	if fstype == "" {
		fstype = defaultFSType
	}
	options := capability.GetMount().GetMountFlags()
	if fstype == "xfs" {
		// A restored snapshot has its origin's filesystem UUID, which xfs
		// refuses to mount twice.
		options = append(options, "nouuid")
	}
	if err := b.Mounter.FormatAndMount(vol.Device, staging, fstype, options); err != nil {
		return status.Errorf(codes.Internal, "formatting (if blank) and mounting %s at %s: %v", vol.Device, staging, err)
	}
	// A volume restored from a snapshot, or cloned, into a larger claim
	// holds its origin's smaller filesystem: grow it to the volume.
	return b.growFilesystem(vol.Device, staging)
}

// applyMountGroup gives the pod's fsGroup the volume by the pod's
// fsGroupChangePolicy; the pod is read only when there is a group, so a
// publish without one costs no API call.
func (b Node) applyMountGroup(ctx context.Context, root, group string, volumeContext map[string]string) error {
	if group == "" {
		return nil
	}
	return backend.ApplyMountGroupWithPolicy(root, group, backend.ChangePolicy(ctx, b.Pods, volumeContext))
}

// growFilesystem grows the filesystem mounted at path to its device, if
// the device is larger.
func (b Node) growFilesystem(device, path string) error {
	resizer := mount.NewResizeFs(b.Mounter.Exec)
	need, err := resizer.NeedResize(device, path)
	if err != nil {
		return status.Errorf(codes.Internal, "comparing the filesystem at %s with its device %s: %v", path, device, err)
	}
	if !need {
		return nil
	}
	if _, err := resizer.Resize(device, path); err != nil {
		hint := ""
		if strings.Contains(err.Error(), "Permission denied to resize") {
			hint = " (the kernel lets only a process with CAP_SYS_RESOURCE grow a mounted ext4: give the node service that capability)"
		}
		return status.Errorf(codes.Internal, "growing the filesystem on %s (mounted at %s): %v%s", device, path, err, hint)
	}
	return nil
}

// publish bind-mounts the staged filesystem, or the block device onto a
// file, read-only if asked.
func (b Node) Publish(ctx context.Context, req *csi.NodePublishVolumeRequest) error {
	capability := req.GetVolumeCapability()
	vol, err := b.volumeFor(ctx, req.GetVolumeId(), capability)
	if err != nil {
		return err
	}
	target, source := req.GetTargetPath(), req.GetStagingTargetPath()
	if capability.GetBlock() != nil {
		source = vol.Device
		err = makeFile(target)
	} else {
		if staged, serr := b.mountedDevice(source); serr != nil || !sameDevice(staged, vol.Device) {
			return status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s: call NodeStageVolume first", req.GetVolumeId(), source)
		}
		if err := b.applyMountGroup(ctx, source, capability.GetMount().GetVolumeMountGroup(), req.GetVolumeContext()); err != nil {
			return err
		}
		err = os.MkdirAll(target, 0o750)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "target path %s: %v", target, err)
	}
	if mounted, err := b.Mounter.IsMountPoint(target); err != nil {
		return status.Errorf(codes.Internal, "target path %s: %v", target, err)
	} else if mounted {
		return nil
	}
	readOnly := req.GetReadonly() || capability.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	if err := backend.BindMount(source, target, readOnly); err != nil {
		return status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", source, target, err)
	}
	return nil
}

// stats is a block volume's size, or its filesystem's figures.
func (b Node) Stats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	vol, block, err := b.volumeAt(ctx, req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	if block {
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: int64(vol.Size)}}}, nil
	}
	return backend.FilesystemStats(req.GetVolumePath())
}

// expand grows the filesystem to the volume, which ControllerExpandVolume
// grew.
func (b Node) Expand(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	vol, block, err := b.volumeAt(ctx, req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	if block || req.GetVolumeCapability().GetBlock() != nil {
		return &csi.NodeExpandVolumeResponse{CapacityBytes: int64(vol.Size)}, nil
	}
	if err := b.growFilesystem(vol.Device, req.GetVolumePath()); err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: int64(vol.Size)}, nil
}

// volumeFor checks the capability asked for and asks the agent where the
// volume is on this node.
func (b Node) volumeFor(ctx context.Context, volumeID string, capability *csi.VolumeCapability) (*nodeapi.Volume, error) {
	if err := checkCapability(capability); err != nil {
		return nil, err
	}
	return b.volume(ctx, volumeID)
}

// volume asks the agent where a volume ID's volume is on this node.
func (n Node) volume(ctx context.Context, volumeID string) (*nodeapi.Volume, error) {
	id, err := backend.ParseVolumeID(volumeID)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	vol, err := n.Agent.Volume(ctx, id.Name)
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			err = status.Errorf(codes.Unavailable, "asking this node's strata agent about %s: %v", volumeID, err)
		}
		return nil, err
	}
	return vol, nil
}

// volumeAt checks a call about a published volume: its volume and the
// path it is used at must exist; block says whether the path is the
// device itself.
func (n Node) volumeAt(ctx context.Context, volumeID, path string) (vol *nodeapi.Volume, block bool, err error) {
	if err := backend.Required("volume ID", volumeID, "volume path", path); err != nil {
		return nil, false, err
	}
	if vol, err = n.volume(ctx, volumeID); err != nil {
		return nil, false, err
	}
	block, err = isDevice(path)
	return vol, block, err
}

// mountedDevice is the device mounted at path, or "" when none is.
func (n Node) mountedDevice(path string) (string, error) {
	mounted, err := n.Mounter.IsMountPoint(path)
	if err != nil {
		return "", status.Errorf(codes.Internal, "checking mounts at %s: %v", path, err)
	}
	if !mounted {
		return "", nil
	}
	dev, _, err := mount.GetDeviceNameFromMount(n.Mounter, path)
	if err != nil {
		return "", status.Errorf(codes.Internal, "reading the device mounted at %s: %v", path, err)
	}
	return dev, nil
}

// sameDevice says whether two paths name one device: lvm2's /dev/vg/lv
// is a link to the /dev/mapper or /dev/dm-N name the mount table shows.
func sameDevice(a, b string) bool {
	if a == b {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

// isDevice says whether path is a block device; a missing path is NotFound.
func isDevice(path string) (bool, error) {
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, status.Errorf(codes.NotFound, "volume path %s does not exist", path)
	}
	if err != nil {
		return false, status.Errorf(codes.Internal, "volume path %s: %v", path, err)
	}
	return info.Mode()&os.ModeDevice != 0, nil
}

// makeFile creates the file a block volume is bind-mounted onto.
func makeFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}
