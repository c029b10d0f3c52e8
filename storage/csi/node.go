package csi

import (
	"context"
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/storage/csi/backend"
	"github.com/strata-gitops/strata/storage/csi/lvmbackend"
)

// Node is the CSI Node service of one node: it stages a volume by
// formatting it if blank and mounting it, and publishes it by bind mount.
type Node struct {
	csi.UnimplementedNodeServer
	Name, IP string
	Agent    lvmbackend.Agent
	Mounter  *mount.SafeFormatAndMount
	// BtrfsBase is the local btrfs agent's base; a btrfs volume is
	// bind-mounted from this host only when its path is under it, else it
	// is mounted over NFS. Empty: always NFS.
	BtrfsBase string
	// Pods reads the pod a publish is for (podInfoOnMount), for its
	// fsGroupChangePolicy; nil: Always.
	Pods client.Reader
}

// NodeGetInfo implements csi.NodeServer.
func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             backend.NodeID(n.Name, n.IP),
		AccessibleTopology: &csi.Topology{Segments: map[string]string{backend.TopologyKey: n.Name}},
	}, nil
}

// NodeGetCapabilities implements csi.NodeServer.
func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeStageVolume implements csi.NodeServer, by the volume's backend.
func (n *Node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId(), "staging target path", req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, n.byContext(req.GetVolumeContext()).Stage(ctx, req)
}

// NodeUnstageVolume implements csi.NodeServer.
func (n *Node) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId(), "staging target path", req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	if err := n.unmount(req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume implements csi.NodeServer, by the volume's backend.
func (n *Node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId(), "target path", req.GetTargetPath(), "staging target path", req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, n.byContext(req.GetVolumeContext()).Publish(ctx, req)
}

// NodeUnpublishVolume implements csi.NodeServer: unmount, then remove the
// target path, which NodePublishVolume made.
func (n *Node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId(), "target path", req.GetTargetPath()); err != nil {
		return nil, err
	}
	if err := mount.CleanupMountPoint(req.GetTargetPath(), n.Mounter, true); err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting %s: %v", req.GetTargetPath(), err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats implements csi.NodeServer, by the volume's backend.
func (n *Node) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	b, err := n.byMount(req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	return b.Stats(ctx, req)
}

// NodeExpandVolume implements csi.NodeServer, by the volume's backend.
func (n *Node) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	b, err := n.byMount(req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	return b.Expand(ctx, req)
}

// unmount unmounts path if something is mounted there, keeping the path.
func (n *Node) unmount(path string) error {
	mounted, err := n.Mounter.IsMountPoint(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !mounted) {
		return nil
	}
	if err == nil {
		err = n.Mounter.Unmount(path)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "unmounting %s: %v", path, err)
	}
	return nil
}
