package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/strata-gitops/strata/storage/csi/backend"
)

// CreateSnapshot implements csi.ControllerServer, by the source volume's
// backend.
func (c *Controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := backend.Required("name", req.GetName(), "source volume ID", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetSourceVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.CreateSnapshot(ctx, id, req)
}

// DeleteSnapshot implements csi.ControllerServer.
func (c *Controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := backend.Required("snapshot ID", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetSnapshotId(), req.GetSecrets())
	if err == nil {
		err = b.DeleteSnapshot(ctx, id, req)
	}
	return &csi.DeleteSnapshotResponse{}, err
}

// GetCapacity implements csi.ControllerServer, by the class's backend.
func (c *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return c.byParameters(req.GetParameters()).GetCapacity(ctx, req)
}
