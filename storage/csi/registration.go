package csi

import (
	"context"
	"fmt"
	"path/filepath"

	"google.golang.org/grpc"
	registrationapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/internal/grpcserver"
)

// registration tells this node's kubelet where the Node service is,
// through the kubelet's plugin registration API: the kubelet watches its
// plugins_registry directory for sockets and asks each what it is. This is
// the work of the community's node-driver-registrar, done by the node
// service itself (docs/csi.md).
type registration struct {
	registrationapi.UnimplementedRegistrationServer
	// endpoint is the Node service's socket as the kubelet sees it.
	endpoint string
}

// GetInfo says this is strata's CSI driver and where its socket is.
func (r *registration) GetInfo(context.Context, *registrationapi.InfoRequest) (*registrationapi.PluginInfo, error) {
	return &registrationapi.PluginInfo{
		Type: registrationapi.CSIPlugin, Name: DriverName, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"},
	}, nil
}

// NotifyRegistrationStatus logs a refusal: the kubelet tries again while
// the socket is there.
func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registrationapi.RegistrationStatus) (*registrationapi.RegistrationStatusResponse, error) {
	log := ctrl.Log.WithName("csi-registration")
	if s.PluginRegistered {
		log.Info("registered with the kubelet", "endpoint", r.endpoint)
	} else {
		log.Info("the kubelet refused the registration", "error", s.Error)
	}
	return &registrationapi.RegistrationStatusResponse{}, nil
}

// serveRegistration serves the registration API in dir, the kubelet's
// plugins_registry, until ctx ends.
func serveRegistration(ctx context.Context, dir, endpoint string) error {
	if endpoint == "" {
		return fmt.Errorf("--registration-dir needs --kubelet-endpoint: the Node service's socket as the kubelet sees it")
	}
	socket := "unix://" + filepath.Join(dir, DriverName+"-reg.sock")
	return grpcserver.Serve(ctx, socket, func(s *grpc.Server) {
		registrationapi.RegisterRegistrationServer(s, &registration{endpoint: endpoint})
	})
}
