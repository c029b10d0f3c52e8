// Package csi is strata's CSI driver, strata.csi.strata.dev: the
// Identity, Controller and Node services (identity.go, controller.go,
// node.go). For LVM volumes the controller service turns volumes and
// snapshots into LogicalVolume objects that the node's agent makes real
// (logicalvolumes.go), and the node service asks its agent for the device
// and formats, mounts and bind-mounts it; btrfs volumes go to the volume
// API of their class's agent (btrfs*.go). See docs/csi.md.
package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/grpcserver"
)

// DriverName is the CSI driver's name, the StorageClasses' provisioner.
const DriverName = storagev1alpha1.CSIDriver

// TopologyKey is the topology segment that names the node a volume is on.
const TopologyKey = "topology.strata.dev/node"

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

// VolumeID identifies a volume or snapshot: the StorageClass it was made
// through and the LogicalVolume that holds it, written
// "{storageClassName}|{name}".
type VolumeID struct {
	StorageClass string
	Name         string
}

func (id VolumeID) String() string { return id.StorageClass + "|" + id.Name }

// ParseVolumeID reads an ID written by VolumeID.String.
func ParseVolumeID(s string) (VolumeID, error) {
	sc, name, ok := strings.Cut(s, "|")
	if !ok || sc == "" || name == "" || strings.Contains(name, "|") {
		return VolumeID{}, fmt.Errorf("volume ID %q is not {storageClassName}|{name}, so not one of %s's", s, DriverName)
	}
	return VolumeID{StorageClass: sc, Name: name}, nil
}

// NodeID is a node's ID, "{nodeName}|{nodeIP}".
func NodeID(name, ip string) string { return name + "|" + ip }

// objectName is the LogicalVolume name for a CSI volume or snapshot name:
// the name itself when it is a valid one, otherwise a digest of it, so
// that any name the CO sends maps to one object and back to it again.
func objectName(csiName string) string {
	if len(validation.IsDNS1123Label(csiName)) == 0 {
		return csiName
	}
	sum := sha256.Sum256([]byte(csiName))
	return "csi-" + hex.EncodeToString(sum[:16])
}

// required returns codes.InvalidArgument naming the first empty field.
func required(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i+1] == "" {
			return status.Errorf(codes.InvalidArgument, "%s is required", fields[i])
		}
	}
	return nil
}
