package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-gitops/strata/storage/csi/backend"
)

// ControllerPublishVolume implements csi.ControllerServer. A btrfs volume
// is exported to the node; an LVM volume needs nothing, as it is on its
// node already, and the call only checks that it is that node.
func (c *Controller) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId(), "node ID", req.GetNodeId()); err != nil {
		return nil, err
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	b, id, err := c.byID(ctx, req.GetVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.ControllerPublishVolume(ctx, id, req)
}

// ControllerUnpublishVolume implements csi.ControllerServer: it takes a
// btrfs volume's export to the node away; an LVM volume has nothing to undo.
func (c *Controller) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.ControllerUnpublishVolume(ctx, id, req)
}
