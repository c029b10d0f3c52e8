// Package btrfsbackend is the CSI driver's backend for btrfs volumes:
// each lives on the storage host's agent that its StorageClass names, is
// made through that agent's volume API, and reaches a node over NFS, or
// by bind mount on the storage host itself. See docs/btrfs.md.
package btrfsbackend

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// The CSI external-provisioner's parameters naming a class's Secret.
const (
	provisionerSecretName      = "csi.storage.k8s.io/provisioner-secret-name"
	provisionerSecretNamespace = "csi.storage.k8s.io/provisioner-secret-namespace"
)

// Publish context keys: how a node reaches a btrfs volume.
const (
	publishNFSServer  = "nfsServer"
	publishExportPath = "exportPath"
	publishPath       = "path"
	publishNode       = "node"
)

// Controller serves the Controller calls of btrfs volumes through the
// agent named by their StorageClass, read when the call comes, so that
// a moved agent is found again.
type Controller struct {
	// Client reads Secrets, and StorageClasses the cache has not seen yet.
	Client client.Client
	// Cache reads StorageClasses.
	Cache client.Reader
	http  *http.Client
	// clients are the HTTP clients that trust a class's CA, by its PEM.
	clients sync.Map
}

// New is the btrfs backend; wait bounds each call to an agent.
func New(c client.Client, cache client.Reader, wait time.Duration) *Controller {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	volumeapi.KeepConnections(transport)
	return &Controller{Client: c, Cache: cache, http: &http.Client{Timeout: wait, Transport: transport}}
}

// btrfsCapabilities refuses what a btrfs volume cannot be: a block device.
func btrfsCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range caps {
		switch {
		case c == nil || c.GetAccessMode() == nil:
			return status.Error(codes.InvalidArgument, "volume capability with an access mode is required")
		case c.GetBlock() != nil:
			return status.Error(codes.InvalidArgument, "a btrfs volume is a directory tree, not a block device: use volumeMode Filesystem")
		case c.GetMount() == nil:
			return status.Error(codes.InvalidArgument, "volume capability has neither block nor mount access")
		}
		switch fs := c.GetMount().GetFsType(); fs {
		case "", "nfs", "nfs4", "btrfs":
		default:
			return status.Errorf(codes.InvalidArgument, "fstype %q: a btrfs volume is mounted as it is (leave fstype empty)", fs)
		}
	}
	return nil
}

// btrfsSize is the quota of a new btrfs volume: the required bytes (1 GiB
// when none) rounded up to 4 KiB, within the limit.
func btrfsSize(r *csi.CapacityRange) (int64, error) {
	want, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if want < 0 || limit < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "capacity range %v has a negative size", r)
	}
	if want == 0 {
		want = backend.DefaultSize
		if limit > 0 && limit < want {
			want = limit
		}
	}
	want = max(want, wire.DefaultMinSize)
	size := (want + 4095) / 4096 * 4096
	if limit > 0 && size > limit {
		return 0, status.Errorf(codes.OutOfRange, "capacity range: %d bytes required, at least %d, above the limit of %d", r.GetRequiredBytes(), size, limit)
	}
	return size, nil
}

// tuning reads a class's volume parameters.
func tuning(params map[string]string) (wire.Tuning, error) {
	t := wire.Tuning{Compression: params["compression"], Mode: params["mode"]}
	ints := map[string]**int{"uid": &t.UID, "gid": &t.GID}
	for key, into := range ints {
		if v := params[key]; v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return t, status.Errorf(codes.InvalidArgument, "StorageClass parameter %s %q is not a number", key, v)
			}
			*into = &n
		}
	}
	if v := params["compressionLevel"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return t, status.Errorf(codes.InvalidArgument, "StorageClass parameter compressionLevel %q is not a number", v)
		}
		t.CompressionLevel = n
	}
	if v := params["nocow"]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return t, status.Errorf(codes.InvalidArgument, "StorageClass parameter nocow %q is not true or false", v)
		}
		t.NoCOW = b
	}
	return t, nil
}

// CreateVolume makes the volume, or a clone of a volume or snapshot.
func (b *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := btrfsCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	size, err := btrfsSize(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	t, err := tuning(req.GetParameters())
	if err != nil {
		return nil, err
	}
	sc, err := b.matchClass(ctx, req.GetParameters())
	if err != nil {
		return nil, err
	}
	topology, err := hostTopology(sc, req.GetAccessibilityRequirements())
	if err != nil {
		return nil, err
	}
	agent, err := b.agent(ctx, sc, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	name := backend.ObjectName(req.GetName())
	var v wire.Volume
	if src := req.GetVolumeContentSource(); src != nil {
		v, err = b.clone(ctx, agent, name, src, size, req.GetCapacityRange())
	} else {
		v, err = agent.CreateVolume(ctx, wire.CreateRequest{Name: name, SizeBytes: size, Tuning: t})
	}
	if err != nil {
		return nil, agentError(err, "volume "+req.GetName())
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           backend.VolumeID{StorageClass: sc.Name, Name: v.Name}.String(),
		CapacityBytes:      v.SizeBytes,
		VolumeContext:      rules.BtrfsVolumeContext(),
		ContentSource:      req.GetVolumeContentSource(),
		AccessibleTopology: topology,
	}}, nil
}

// hostTopology is where a node-local class's volume may be used: its
// host node alone. A request that may not land there (a pod bound to
// another node) is refused before anything is made. A class without a
// host node has its volumes everywhere, over NFS.
func hostTopology(sc *storagev1.StorageClass, req *csi.TopologyRequirement) ([]*csi.Topology, error) {
	node := sc.Parameters[rules.HostNodeParameter]
	if node == "" {
		return nil, nil
	}
	requisite := req.GetRequisite()
	allowed := len(requisite) == 0
	for _, t := range requisite {
		if t.GetSegments()[backend.TopologyKey] == node {
			allowed = true
		}
	}
	if !allowed {
		return nil, status.Errorf(codes.ResourceExhausted,
			"StorageClass %s keeps its volumes on node %s (%s), which the claim may not use: schedule its pod there or use another class",
			sc.Name, node, rules.HostNodeParameter)
	}
	return []*csi.Topology{{Segments: map[string]string{backend.TopologyKey: node}}}, nil
}

// clone makes a volume from a snapshot or volume of the same agent.
func (b *Controller) clone(ctx context.Context, agent *volumeapi.Client, name string, src *csi.VolumeContentSource, size int64, r *csi.CapacityRange) (wire.Volume, error) {
	var source wire.Source
	var sourceID string
	switch {
	case src.GetSnapshot() != nil:
		sourceID = src.GetSnapshot().GetSnapshotId()
	case src.GetVolume() != nil:
		sourceID = src.GetVolume().GetVolumeId()
	default:
		return wire.Volume{}, status.Error(codes.InvalidArgument, "volume content source is neither a snapshot nor a volume")
	}
	id, err := backend.ParseVolumeID(sourceID)
	if err != nil {
		return wire.Volume{}, status.Error(codes.NotFound, err.Error())
	}
	var sourceSize int64
	if src.GetSnapshot() != nil {
		source.Snapshot = id.Name
		snap, err := agent.GetSnapshot(ctx, id.Name)
		if err != nil {
			return wire.Volume{}, agentError(err, "source snapshot "+sourceID)
		}
		sourceSize = snap.SizeBytes
	} else {
		source.Volume = id.Name
		v, err := agent.GetVolume(ctx, id.Name)
		if err != nil {
			return wire.Volume{}, agentError(err, "source volume "+sourceID)
		}
		sourceSize = v.SizeBytes
	}
	if limit := r.GetLimitBytes(); limit > 0 && sourceSize > limit {
		return wire.Volume{}, status.Errorf(codes.OutOfRange, "source %s is %d bytes, more than the limit of %d", sourceID, sourceSize, limit)
	}
	return agent.Clone(ctx, wire.CloneRequest{Name: name, Source: source, SizeBytes: max(size, sourceSize)})
}

// DeleteVolume removes the volume with its exports. A volume with
// snapshots stays (FailedPrecondition) until they are deleted: a
// snapshot is data the user asked to keep. The agent checks that under
// the lock snapshots are made with, so none made meanwhile is lost.
func (b *Controller) DeleteVolume(ctx context.Context, id backend.VolumeID, req *csi.DeleteVolumeRequest) error {
	secrets := req.GetSecrets()
	agent, _, err := b.agentFor(ctx, id, secrets)
	if err != nil {
		return err
	}
	v, err := agent.GetVolume(ctx, id.Name)
	if volumeapi.StatusOf(err) == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return agentError(err, "volume "+id.String())
	}
	// Exports of nodes that never unpublished go with the volume.
	for _, node := range v.Clients {
		if _, err := agent.RemoveExport(ctx, id.Name, node); err != nil && volumeapi.StatusOf(err) != http.StatusNotFound {
			return agentError(err, "volume "+id.String())
		}
	}
	err = agent.DeleteVolume(ctx, id.Name, false)
	switch volumeapi.StatusOf(err) {
	case http.StatusNotFound:
		return nil
	case http.StatusConflict:
		return status.Errorf(codes.FailedPrecondition, "volume %s is kept while it has snapshots; delete them (their VolumeSnapshots) first: %v", id, err)
	}
	if err != nil {
		return agentError(err, "volume "+id.String())
	}
	return nil
}

// ControllerExpandVolume raises the quota; nothing is left for the node.
func (b *Controller) ControllerExpandVolume(ctx context.Context, id backend.VolumeID, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	size, err := btrfsSize(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	agent, _, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	v, err := agent.GetVolume(ctx, id.Name)
	if err != nil {
		return nil, agentError(err, "volume "+id.String())
	}
	if v.SizeBytes < size {
		if v, err = agent.UpdateVolume(ctx, id.Name, wire.UpdateRequest{SizeBytes: &size}); err != nil {
			return nil, agentError(err, "volume "+id.String())
		}
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.SizeBytes, NodeExpansionRequired: false}, nil
}

// ValidateVolumeCapabilities confirms what a btrfs volume can do: be
// mounted, by any number of nodes.
func (b *Controller) ValidateVolumeCapabilities(ctx context.Context, id backend.VolumeID, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	agent, _, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	if _, err := agent.GetVolume(ctx, id.Name); err != nil {
		return nil, agentError(err, "volume "+id.String())
	}
	if err := btrfsCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// CreateSnapshot makes a read-only snapshot on the volume's agent.
func (b *Controller) CreateSnapshot(ctx context.Context, id backend.VolumeID, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	agent, _, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	snap, err := agent.CreateSnapshot(ctx, wire.SnapshotRequest{Name: backend.ObjectName(req.GetName()), Volume: id.Name})
	if err != nil {
		return nil, agentError(err, "snapshot "+req.GetName())
	}
	return &csi.CreateSnapshotResponse{Snapshot: btrfsSnapshot(id.StorageClass, snap)}, nil
}

// DeleteSnapshot removes a snapshot; one already gone is done.
func (b *Controller) DeleteSnapshot(ctx context.Context, id backend.VolumeID, req *csi.DeleteSnapshotRequest) error {
	secrets := req.GetSecrets()
	agent, _, err := b.agentFor(ctx, id, secrets)
	if err != nil {
		return err
	}
	if err := agent.DeleteSnapshot(ctx, id.Name); err != nil && volumeapi.StatusOf(err) != http.StatusNotFound {
		return agentError(err, "snapshot "+id.String())
	}
	return nil
}

// ControllerPublishVolume exports the volume to the node's address and
// tells the node where to mount it from. A volume published to its own
// storage host needs no export: the node bind-mounts it.
func (b *Controller) ControllerPublishVolume(ctx context.Context, id backend.VolumeID, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := btrfsCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	agent, sc, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	v, err := agent.GetVolume(ctx, id.Name) // a missing volume is the worse error: NotFound first
	if err != nil {
		return nil, agentError(err, "volume "+id.String())
	}
	node, ip, err := backend.NodeAddress(req.GetNodeId())
	if err != nil {
		return nil, err
	}
	if v.Node != node {
		if v, err = agent.AddExport(ctx, id.Name, ip); err != nil {
			return nil, agentError(err, "exporting volume "+id.String()+" to "+ip)
		}
	}
	server := sc.Parameters[rules.NFSServerParameter]
	if server == "" {
		u, _ := url.Parse(sc.Parameters[rules.AgentURLParameter])
		server = u.Hostname()
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{
		publishNFSServer: server, publishExportPath: v.ExportPath, publishPath: v.Path, publishNode: v.Node,
	}}, nil
}

// ControllerUnpublishVolume takes the node's export away; a volume or
// export already gone is done.
func (b *Controller) ControllerUnpublishVolume(ctx context.Context, id backend.VolumeID, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	agent, _, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	node, ip, err := backend.NodeAddress(req.GetNodeId())
	if err != nil {
		return &csi.ControllerUnpublishVolumeResponse{}, nil // never published there
	}
	v, err := agent.GetVolume(ctx, id.Name)
	if volumeapi.StatusOf(err) == http.StatusNotFound || (err == nil && v.Node == node) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil // gone, or bind-mounted on its host: no export
	}
	if err != nil {
		return nil, agentError(err, "volume "+id.String())
	}
	if _, err := agent.RemoveExport(ctx, id.Name, ip); err != nil && volumeapi.StatusOf(err) != http.StatusNotFound {
		return nil, agentError(err, "removing the export of "+id.String()+" to "+ip)
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// GetCapacity is the agent's free space. Classes with the same
// parameters share their agent and its token, so any of them answers.
func (b *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	found, err := b.classesFor(ctx, req.GetParameters())
	if err != nil {
		return nil, err
	}
	sc := &found[0]
	agent, err := b.agent(ctx, sc, nil)
	if err != nil {
		return nil, err
	}
	st, err := agent.Stats(ctx)
	if err != nil {
		return nil, agentError(err, "capacity of StorageClass "+sc.Name)
	}
	free := st.Filesystem.Free
	return &csi.GetCapacityResponse{AvailableCapacity: free, MaximumVolumeSize: wrapperspb.Int64(free)}, nil
}

// GetSnapshot reads one snapshot from its class's agent.
func (b *Controller) GetSnapshot(ctx context.Context, id backend.VolumeID, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	secrets := req.GetSecrets()
	agent, _, err := b.agentFor(ctx, id, secrets)
	if err != nil {
		return nil, err
	}
	snap, err := agent.GetSnapshot(ctx, id.Name)
	if err != nil {
		return nil, agentError(err, "snapshot "+id.String())
	}
	return &csi.GetSnapshotResponse{Snapshot: btrfsSnapshot(id.StorageClass, snap)}, nil
}

// Route says whether a volume or snapshot ID is a btrfs class's. An ID
// whose class is gone cannot be told apart from an LVM volume, unless the
// call carries a tenant token: then it is a btrfs volume whose agent
// cannot be found, and the call fails rather than leave it behind.
func (b *Controller) Route(ctx context.Context, volumeID string, secrets map[string]string) (backend.VolumeID, bool, error) {
	id, err := backend.ParseVolumeID(volumeID)
	if err != nil {
		return id, false, nil
	}
	sc, err := b.classOf(ctx, id)
	switch {
	case err == nil:
		return id, rules.IsBtrfsClass(sc.Parameters), nil
	case apierrors.IsNotFound(err) && secrets[rules.TokenKey] != "":
		return id, false, status.Errorf(codes.FailedPrecondition,
			"StorageClass %s, which says where the agent of %s is, is gone: create it again (its agentURL may change)", id.StorageClass, volumeID)
	case apierrors.IsNotFound(err):
		return id, false, nil
	}
	return id, false, status.Errorf(codes.Unavailable, "StorageClass %s: %v", id.StorageClass, err)
}
