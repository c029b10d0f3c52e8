// Package csi is strata's CSI driver, strata.csi.strata.dev: the
// Identity, Controller and Node services. Each call's arguments are
// checked here and the call is routed once (backend.go) to the backend of
// its volume: storage/csi/lvmbackend, whose volumes are LogicalVolume
// objects each node's agent makes real, or storage/csi/btrfsbackend,
// whose volumes live on the agent its StorageClass names. Listing asks
// every backend and leaves out, with a log line, one that cannot answer.
// See docs/csi.md.
package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	ctrl "sigs.k8s.io/controller-runtime"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/grpcserver"
)

// DriverName is the CSI driver's name, the StorageClasses' provisioner.
const DriverName = storagev1alpha1.CSIDriver

// Serve serves the given services on a unix endpoint until ctx ends.
func Serve(ctx context.Context, endpoint string, identity csi.IdentityServer, controller csi.ControllerServer, node csi.NodeServer) error {
	return grpcserver.Serve(ctx, endpoint, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, identity)
		if controller != nil {
			csi.RegisterControllerServer(s, controller)
		}
		if node != nil {
			csi.RegisterNodeServer(s, node)
		}
	}, grpc.UnaryInterceptor(logErrors))
}

// logErrors logs every failed call: the sidecars show only the last one.
func logErrors(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		ctrl.Log.WithName("csi").Info("call failed", "method", info.FullMethod, "error", err.Error())
	}
	return resp, err
}
