package csi

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/lvmcluster"
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
	id, btrfs, err := c.btrfs.route(ctx, req.GetVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	if btrfs {
		return c.btrfs.ControllerPublishVolume(ctx, id, req)
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	lv, err := c.lookup(ctx, req.GetVolumeId(), kindVolume)
	if err != nil {
		return nil, err
	}
	node, _, err := nodeAddress(req.GetNodeId())
	if err != nil {
		return nil, err
	}
	if err := c.Cache.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); apierrors.IsNotFound(err) {
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
	id, btrfs, err := c.btrfs.route(ctx, req.GetVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	if btrfs {
		return c.btrfs.ControllerUnpublishVolume(ctx, id, req)
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// ListVolumes implements csi.ControllerServer: the volumes of both
// backends, ordered by ID. The token is the index of the next entry.
func (c *Controller) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	start := 0
	if t := req.GetStartingToken(); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return nil, status.Errorf(codes.Aborted, "starting token %q is not one ListVolumes gave", t)
		}
		start = n
	}
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max entries %d is negative", req.GetMaxEntries())
	}
	entries, err := c.btrfs.listVolumes(ctx)
	if err != nil {
		return nil, err
	}
	lvm, err := c.listLogicalVolumes(ctx)
	if err != nil {
		return nil, err
	}
	entries = append(entries, lvm...)
	slices.SortFunc(entries, func(a, b *csi.ListVolumesResponse_Entry) int {
		return strings.Compare(a.GetVolume().GetVolumeId(), b.GetVolume().GetVolumeId())
	})
	if start > len(entries) {
		return nil, status.Errorf(codes.Aborted, "starting token %d is past the %d volumes there are", start, len(entries))
	}
	end := len(entries)
	if n := int(req.GetMaxEntries()); n > 0 && start+n < end {
		end = start + n
	}
	next := ""
	if end < len(entries) {
		next = strconv.Itoa(end)
	}
	return &csi.ListVolumesResponse{Entries: entries[start:end], NextToken: next}, nil
}

// listLogicalVolumes lists the LVM volumes made through CSI.
func (c *Controller) listLogicalVolumes(ctx context.Context) ([]*csi.ListVolumesResponse_Entry, error) {
	lvs := &storagev1alpha1.LogicalVolumeList{}
	if err := c.Cache.List(ctx, lvs, client.MatchingLabels{KindLabel: kindVolume}); err != nil {
		return nil, apiError(err, "list")
	}
	var entries []*csi.ListVolumesResponse_Entry
	for _, lv := range lvs.Items {
		sc := lv.Annotations[StorageClassAnnotation]
		if sc == "" {
			sc = lvmcluster.StorageClassName(lv.Spec.DeviceClass)
		}
		entries = append(entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{
			VolumeId:           VolumeID{StorageClass: sc, Name: lv.Name}.String(),
			CapacityBytes:      lv.Spec.Size.Value(),
			AccessibleTopology: []*csi.Topology{{Segments: map[string]string{TopologyKey: lv.Spec.NodeName}}},
		}})
	}
	return entries, nil
}
