package lvmbackend

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/storage/csi/backend"
)

// ControllerPublishVolume checks that the volume is on the node: an LVM
// volume needs nothing more.
func (b *Controller) ControllerPublishVolume(ctx context.Context, _ backend.VolumeID, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	lv, err := b.lookup(ctx, req.GetVolumeId(), kindVolume)
	if err != nil {
		return nil, err
	}
	node, _, err := backend.NodeAddress(req.GetNodeId())
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

// ControllerUnpublishVolume has nothing to undo for an LVM volume.
func (b *Controller) ControllerUnpublishVolume(context.Context, backend.VolumeID, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
