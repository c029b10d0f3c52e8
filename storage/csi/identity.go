package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Identity tells the CO who the driver is and what it offers.
type Identity struct {
	csi.UnimplementedIdentityServer
	Version string
	// Ready reports whether the process can serve calls (for Probe).
	Ready func(context.Context) error
}

// GetPluginInfo implements csi.IdentityServer.
func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	version := i.Version
	if version == "" {
		version = "dev"
	}
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: version}, nil
}

// GetPluginCapabilities implements csi.IdentityServer. The capabilities
// are the whole plugin's: the node processes say the plugin has a
// Controller service too, though another process serves it.
func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	caps := []*csi.PluginCapability{
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe implements csi.IdentityServer.
func (i *Identity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	ready := i.Ready == nil || i.Ready(ctx) == nil
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(ready)}, nil
}
