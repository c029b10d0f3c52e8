package csi

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/storage/csi/backend"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
	"github.com/strata-gitops/strata/storage/csi/lvmbackend"
)

// Controller is the CSI Controller service. It keeps no state of its own:
// it checks each call and routes it to the backend of its volume (an LVM
// volume is a LogicalVolume object its node's agent makes real; a btrfs
// volume lives on its class's agent).
type Controller struct {
	csi.UnimplementedControllerServer
	// Client writes, and reads what must be current.
	Client client.Client
	btrfs  *btrfsbackend.Controller
	lvm    *lvmbackend.Controller
}

// NewController starts informers for what the service reads and returns
// the service once they are synced.
func NewController(ctx context.Context, cfg *rest.Config, wait time.Duration) (*Controller, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	ctl := &Controller{Client: c, btrfs: btrfsbackend.New(c, informers, wait)}
	if ctl.lvm, err = lvmbackend.New(ctx, c, informers, wait); err != nil {
		return nil, err
	}
	if _, err := informers.GetInformer(ctx, &storagev1.StorageClass{}); err != nil {
		return nil, err
	}
	if err := startAndSync(ctx, informers.Start, informers.WaitForCacheSync); err != nil {
		return nil, err
	}
	return ctl, nil
}

// startAndSync starts the informers and waits for their caches. An
// informer that fails to start is returned as the error, not left to be
// seen as a wait that never ends; one that stops with an error later is
// logged.
func startAndSync(ctx context.Context, start func(context.Context) error, synced func(context.Context) bool) error {
	stopped := make(chan error, 1)
	go func() { stopped <- start(ctx) }()
	syncCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan bool, 1)
	go func() { done <- synced(syncCtx) }()
	select {
	case err := <-stopped:
		if err == nil {
			err = ctx.Err()
		}
		return fmt.Errorf("the CSI controller's informers stopped before their caches synced: %w", err)
	case ok := <-done:
		if !ok {
			return fmt.Errorf("the CSI controller's caches did not sync: %w", ctx.Err())
		}
	}
	go func() {
		if err := <-stopped; err != nil {
			log.FromContext(ctx).Error(err, "the CSI controller's informers stopped")
		}
	}()
	return nil
}

// ControllerGetCapabilities implements csi.ControllerServer.
func (c *Controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// CreateVolume implements csi.ControllerServer, by the class's backend.
func (c *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := backend.Required("name", req.GetName()); err != nil {
		return nil, err
	}
	return c.byParameters(req.GetParameters()).CreateVolume(ctx, req)
}

// DeleteVolume implements csi.ControllerServer, by the volume's backend;
// either waits until the volume is gone, so its space is free on return.
func (c *Controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId()); err != nil {
		return nil, err
	}
	b, id, err := c.byID(ctx, req.GetVolumeId(), req.GetSecrets())
	if err == nil {
		err = b.DeleteVolume(ctx, id, req)
	}
	return &csi.DeleteVolumeResponse{}, err
}

// ControllerExpandVolume implements csi.ControllerServer, by the volume's
// backend. An LVM volume's filesystem is grown by NodeExpandVolume.
func (c *Controller) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity range is required")
	}
	b, id, err := c.byID(ctx, req.GetVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.ControllerExpandVolume(ctx, id, req)
}

// ValidateVolumeCapabilities implements csi.ControllerServer.
func (c *Controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := backend.Required("volume ID", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	b, id, err := c.byID(ctx, req.GetVolumeId(), req.GetSecrets())
	if err != nil {
		return nil, err
	}
	return b.ValidateVolumeCapabilities(ctx, id, req)
}
