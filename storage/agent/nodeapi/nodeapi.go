// Package nodeapi is the agent's narrow local API. The CSI node service
// on the same node asks it, over a unix socket, which block device holds a
// LogicalVolume's volume: the agent knows from the volume manager itself,
// not from a status that may be stale.
//
// It is gRPC with JSON messages: two small messages do not justify a
// protobuf toolchain, and gRPC still gives deadlines, status codes and
// the same server plumbing as the CSI services.
package nodeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/grpcserver"
	"github.com/strata-gitops/strata/storage/lvm"
)

// VolumeRequest names a LogicalVolume object.
type VolumeRequest struct {
	Name string `json:"name"`
}

// Volume is where a LogicalVolume's volume is on this node.
type Volume struct {
	VolumeGroup string `json:"volumeGroup"`
	Name        string `json:"name"`
	Device      string `json:"device"`
	Size        uint64 `json:"size"`
}

// Server answers from the node's volume manager. Only volumes in groups
// carrying ManagedTag, and tagged with the LogicalVolume's name, count.
type Server struct {
	LVM        lvm.Manager
	ManagedTag string
	// Locate, when set, says where a LogicalVolume's volume should be
	// (from its spec), which spares listing every group; without an
	// answer the groups are searched.
	Locate func(ctx context.Context, name string) (vg, lv string, ok bool)
}

// Volume finds the volume tagged with the LogicalVolume's name and
// returns its device, activating it if needed.
func (s *Server) Volume(ctx context.Context, req *VolumeRequest) (*Volume, error) {
	if req.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "volume request without a LogicalVolume name")
	}
	tag := storagev1alpha1.LogicalVolumeTag(req.Name)
	if s.Locate != nil {
		if vg, name, ok := s.Locate(ctx, req.Name); ok {
			if lv, err := lvm.FindVolume(ctx, s.LVM, vg, name); err == nil && slices.Contains(lv.Tags, tag) {
				return s.device(ctx, lv)
			}
		}
	}
	groups, err := s.LVM.VolumeGroups(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing volume groups: %v", err)
	}
	for _, vg := range groups {
		if !vg.HasTag(s.ManagedTag) {
			continue
		}
		lvs, err := s.LVM.LogicalVolumes(ctx, vg.Name)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "listing volumes of %s: %v", vg.Name, err)
		}
		for _, lv := range lvs {
			if slices.Contains(lv.Tags, tag) {
				return s.device(ctx, lv)
			}
		}
	}
	return nil, status.Errorf(codes.NotFound, "no volume on this node belongs to LogicalVolume %s", req.Name)
}

func (s *Server) device(ctx context.Context, lv lvm.LogicalVolume) (*Volume, error) {
	dev, err := s.LVM.DevicePath(ctx, lv.VolumeGroup, lv.Name)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "device of %s/%s: %v", lv.VolumeGroup, lv.Name, err)
	}
	return &Volume{VolumeGroup: lv.VolumeGroup, Name: lv.Name, Device: dev, Size: lv.Size}, nil
}

const serviceName = "strata.agent.v1alpha1.Node"

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*interface {
		Volume(context.Context, *VolumeRequest) (*Volume, error)
	})(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Volume", Handler: volumeHandler}},
}

func volumeHandler(srv any, ctx context.Context, decode func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
	req := &VolumeRequest{}
	if err := decode(req); err != nil {
		return nil, err
	}
	call := func(ctx context.Context, req any) (any, error) {
		return srv.(*Server).Volume(ctx, req.(*VolumeRequest))
	}
	if intercept == nil {
		return call(ctx, req)
	}
	return intercept(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + serviceName + "/Volume"}, call)
}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return "json" }

// Serve serves s on the unix socket until ctx ends.
func Serve(ctx context.Context, socket string, s *Server) error {
	return grpcserver.Serve(ctx, socket, func(srv *grpc.Server) { srv.RegisterService(&serviceDesc, s) },
		grpc.ForceServerCodec(jsonCodec{}))
}

// Client calls an agent's API.
type Client struct {
	conn *grpc.ClientConn
}

// Dial connects lazily to the agent's socket.
func Dial(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(jsonCodec{})))
	if err != nil {
		return nil, fmt.Errorf("agent API at %s: %w", socket, err)
	}
	return &Client{conn: conn}, nil
}

// Volume asks where the LogicalVolume's volume is. A LogicalVolume with
// no volume on this node fails with codes.NotFound.
func (c *Client) Volume(ctx context.Context, name string) (*Volume, error) {
	out := &Volume{}
	if err := c.conn.Invoke(ctx, "/"+serviceName+"/Volume", &VolumeRequest{Name: name}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
