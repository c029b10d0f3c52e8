package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerPublishVolume implements csi.ControllerServer. A btrfs volume
// is exported to the node; an LVM volume needs nothing, as it is on its
// node already, and the call only checks that it is that node.
func (c *Controller) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := required("volume ID", req.GetVolumeId(), "node ID", req.GetNodeId()); err != nil {
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

// ControllerPublishVolume checks that the volume is on the node: an LVM
// volume needs nothing more.
func (b *lvmBackend) ControllerPublishVolume(ctx context.Context, _ VolumeID, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	lv, err := b.lookup(ctx, req.GetVolumeId(), kindVolume)
	if err != nil {
		return nil, err
	}
	node, _, err := nodeAddress(req.GetNodeId())
	if err != nil {
		return nil, err
	}
	if err := b.Cache.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); apierrors.IsNotFound(err) {
		return nil, status.Errorf(codes.NotFound, "node %s not found", node)
	} else if err != nil {
		return nil, apiError(err, lv.Name)
	}
	if lv.Spec.NodeName != node {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is on node %s and cannot be used on %s", req.GetVolumeId(), lv.Spec.NodeName, node)
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

// ControllerUnpublishVolume implements csi.ControllerServer: it takes a
// btrfs volume's export to the node away; an LVM volume has nothing to undo.
func (c *Controller) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if err := required("volume ID", req.GetVolumeId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.ControllerUnpublishVolume(ctx, id, req)
}

// ControllerUnpublishVolume has nothing to undo for an LVM volume.
func (b *lvmBackend) ControllerUnpublishVolume(context.Context, VolumeID, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
