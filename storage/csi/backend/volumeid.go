package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// TopologyKey is the topology segment that names the node a volume is on.
const TopologyKey = "topology.strata.dev/node"

// DefaultSize is the size of a new volume whose capacity range asks for
// none.
const DefaultSize = 1 << 30

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
		return VolumeID{}, fmt.Errorf("volume ID %q is not {storageClassName}|{name}, so not one of %s's", s, storagev1alpha1.CSIDriver)
	}
	return VolumeID{StorageClass: sc, Name: name}, nil
}

// NodeID is a node's ID, "{nodeName}|{nodeIP}".
func NodeID(name, ip string) string { return name + "|" + ip }

// nodeAddress reads the IP of a node ID, "{name}|{ip}".
func NodeAddress(nodeID string) (name, ip string, err error) {
	name, ip, ok := strings.Cut(nodeID, "|")
	if !ok || name == "" || net.ParseIP(ip) == nil {
		return "", "", status.Errorf(codes.NotFound, "node ID %q is not {nodeName}|{nodeIP}, so no node of %s", nodeID, storagev1alpha1.CSIDriver)
	}
	return name, ip, nil
}

// objectName is the LogicalVolume name for a CSI volume or snapshot name:
// the name itself when it is a valid one, otherwise a digest of it, so
// that any name the CO sends maps to one object and back to it again.
func ObjectName(csiName string) string {
	if len(validation.IsDNS1123Label(csiName)) == 0 {
		return csiName
	}
	sum := sha256.Sum256([]byte(csiName))
	return "csi-" + hex.EncodeToString(sum[:16])
}

// required returns codes.InvalidArgument naming the first empty field.
func Required(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i+1] == "" {
			return status.Errorf(codes.InvalidArgument, "%s is required", fields[i])
		}
	}
	return nil
}
