package csi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumes"
)

// StorageClass parameters of the btrfs backend. A class with AgentURL is
// a btrfs class; its volumes live on the storage host's agent.
const (
	AgentURLParameter  = "agentURL"
	NFSServerParameter = "nfsServer"
	// TokenKey is the key of the tenant token in the CSI secrets and in
	// the Secret the class's provisioner-secret parameters name.
	TokenKey = "token"

	provisionerSecretName      = "csi.storage.k8s.io/provisioner-secret-name"
	provisionerSecretNamespace = "csi.storage.k8s.io/provisioner-secret-namespace"

	// BackendContext marks a btrfs volume in its volume context.
	BackendContext = "storage.strata.dev/backend"
	backendBtrfs   = "btrfs"
)

// Publish context keys: how a node reaches a btrfs volume.
const (
	publishNFSServer  = "nfsServer"
	publishExportPath = "exportPath"
	publishPath       = "path"
	publishNode       = "node"
)

// isBtrfs says whether StorageClass parameters are a btrfs class's.
func isBtrfs(params map[string]string) bool { return params[AgentURLParameter] != "" }

// btrfsBackend serves the Controller calls of btrfs volumes through the
// agent named by their StorageClass, read when the call comes, so that
// a moved agent is found again.
type btrfsBackend struct {
	c    *Controller
	http *http.Client
	// clients are the HTTP clients that trust a class's CA, by its PEM.
	clients sync.Map
}

// agent returns a client of the StorageClass's agent with the tenant
// token from the call's secrets or, failing those, from the Secret the
// class's provisioner-secret parameters name.
func (b *btrfsBackend) agent(ctx context.Context, sc *storagev1.StorageClass, secrets map[string]string) (*volumeapi.Client, error) {
	u := sc.Parameters[AgentURLParameter]
	if parsed, err := url.Parse(u); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s: %s %q is not an http(s) URL", sc.Name, AgentURLParameter, u)
	}
	token := secrets[TokenKey]
	if token == "" {
		var err error
		if token, err = b.classToken(ctx, sc); err != nil {
			return nil, err
		}
	}
	httpClient, err := b.httpFor(ctx, sc, u)
	if err != nil {
		return nil, err
	}
	return &volumeapi.Client{URL: u, Token: token, HTTP: httpClient}, nil
}

// AgentCASecretParameter names, as namespace/name, a Secret whose ca.crt
// is the CA the class's agent's TLS certificate must chain to.
const AgentCASecretParameter = "agentCASecret"

// httpFor is the HTTP client for the class's agent: one that trusts only
// the class's CA when it names one, the system's roots otherwise. Clients
// are kept by CA, so connections are reused across calls.
func (b *btrfsBackend) httpFor(ctx context.Context, sc *storagev1.StorageClass, agentURL string) (*http.Client, error) {
	ref := sc.Parameters[AgentCASecretParameter]
	if ref == "" {
		return b.http, nil
	}
	if !strings.HasPrefix(agentURL, "https://") {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s names %s but its %s %s is not https://", sc.Name, AgentCASecretParameter, AgentURLParameter, agentURL)
	}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s: %s %q: write namespace/name", sc.Name, AgentCASecretParameter, ref)
	}
	secret := &corev1.Secret{}
	if err := b.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "StorageClass %s: reading its CA Secret %s: %v", sc.Name, ref, err)
	}
	caPEM := secret.Data["ca.crt"]
	if cached, ok := b.clients.Load(string(caPEM)); ok {
		return cached.(*http.Client), nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, status.Errorf(codes.FailedPrecondition, "StorageClass %s: Secret %s has no PEM certificate under ca.crt", sc.Name, ref)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c := &http.Client{Timeout: b.http.Timeout, Transport: transport}
	actual, _ := b.clients.LoadOrStore(string(caPEM), c)
	return actual.(*http.Client), nil
}

func (b *btrfsBackend) classToken(ctx context.Context, sc *storagev1.StorageClass) (string, error) {
	name, ns := sc.Parameters[provisionerSecretName], sc.Parameters[provisionerSecretNamespace]
	if name == "" || strings.Contains(name+ns, "${") {
		return "", status.Errorf(codes.InvalidArgument, "no tenant token: the call carries no %q secret, and StorageClass %s names no fixed Secret in %s",
			TokenKey, sc.Name, provisionerSecretName)
	}
	secret := &corev1.Secret{}
	if err := b.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "StorageClass %s: reading its token Secret %s/%s: %v", sc.Name, ns, name, err)
	}
	token := strings.TrimSpace(string(secret.Data[TokenKey]))
	if token == "" {
		return "", status.Errorf(codes.FailedPrecondition, "Secret %s/%s has no %q key with the tenant token", ns, name, TokenKey)
	}
	return token, nil
}

// classOf returns the StorageClass a volume ID names.
func (b *btrfsBackend) classOf(ctx context.Context, id VolumeID) (*storagev1.StorageClass, error) {
	sc := &storagev1.StorageClass{}
	err := b.c.Cache.Get(ctx, client.ObjectKey{Name: id.StorageClass}, sc)
	if apierrors.IsNotFound(err) {
		err = b.c.Client.Get(ctx, client.ObjectKey{Name: id.StorageClass}, sc)
	}
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// matchClass finds the StorageClass CreateVolume was called for: the one
// of this driver with exactly these parameters (the sidecar adds only
// csi.storage.k8s.io/ ones), or the one the storage-class parameter names.
func (b *btrfsBackend) matchClass(ctx context.Context, params map[string]string) (*storagev1.StorageClass, error) {
	if name := params[storagev1alpha1.StorageClassParameter]; name != "" {
		sc, err := b.classOf(ctx, VolumeID{StorageClass: name})
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "StorageClass %s (parameter %s): %v", name, storagev1alpha1.StorageClassParameter, err)
		}
		return sc, nil
	}
	want := userParameters(params)
	found, err := classesWith(ctx, b.c.Cache, want)
	if err == nil && len(found) == 0 {
		// A class created moments ago (with its claim, in one apply) may
		// not have reached the cache yet.
		found, err = classesWith(ctx, b.c.Client, want)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "listing StorageClasses: %v", err)
	}
	switch len(found) {
	case 1:
		return &found[0], nil
	case 0:
		return nil, status.Errorf(codes.InvalidArgument, "no StorageClass of %s has the parameters %v; a btrfs volume needs one, which tells later calls where its agent is",
			DriverName, want)
	}
	return nil, status.Errorf(codes.InvalidArgument, "StorageClasses %s and %s have the same parameters: add %s with each one's name to tell them apart",
		found[0].Name, found[1].Name, storagev1alpha1.StorageClassParameter)
}

// classesWith lists this driver's StorageClasses whose user parameters
// are want.
func classesWith(ctx context.Context, r client.Reader, want map[string]string) ([]storagev1.StorageClass, error) {
	classes := &storagev1.StorageClassList{}
	if err := r.List(ctx, classes); err != nil {
		return nil, err
	}
	var found []storagev1.StorageClass
	for _, sc := range classes.Items {
		if sc.Provisioner == DriverName && maps.Equal(userParameters(sc.Parameters), want) {
			found = append(found, sc)
		}
	}
	return found, nil
}

func userParameters(params map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range params {
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			out[k] = v
		}
	}
	return out
}

// agentFor resolves a volume or snapshot ID to its class's agent.
func (b *btrfsBackend) agentFor(ctx context.Context, id VolumeID, secrets map[string]string) (*volumeapi.Client, *storagev1.StorageClass, error) {
	sc, err := b.classOf(ctx, id)
	if err != nil {
		return nil, nil, status.Errorf(codes.Unavailable, "StorageClass %s: %v", id.StorageClass, err)
	}
	agent, err := b.agent(ctx, sc, secrets)
	return agent, sc, err
}

// agentError maps an agent's answer to a gRPC status.
func agentError(err error, what string) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	code := map[string]codes.Code{
		"Invalid": codes.InvalidArgument, "NotFound": codes.NotFound, "Conflict": codes.AlreadyExists,
		"InUse": codes.FailedPrecondition, "NoSpace": codes.ResourceExhausted, "Unauthorized": codes.Unauthenticated,
	}[volumeapi.ReasonOf(err)]
	if code == codes.OK {
		code = codes.Unavailable
		if volumeapi.StatusOf(err) >= 500 {
			code = codes.Internal
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	}
	return status.Errorf(code, "%s: %v", what, err)
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
		want = defaultSize
		if limit > 0 && limit < want {
			want = limit
		}
	}
	want = max(want, volumes.DefaultMinSize)
	size := (want + 4095) / 4096 * 4096
	if limit > 0 && size > limit {
		return 0, status.Errorf(codes.OutOfRange, "capacity range: %d bytes required, at least %d, above the limit of %d", r.GetRequiredBytes(), size, limit)
	}
	return size, nil
}

// tuning reads a class's volume parameters.
func tuning(params map[string]string) (volumes.Tuning, error) {
	t := volumes.Tuning{Compression: params["compression"], Mode: params["mode"]}
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
func (b *btrfsBackend) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
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
	agent, err := b.agent(ctx, sc, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	name := objectName(req.GetName())
	var v volumes.Volume
	if src := req.GetVolumeContentSource(); src != nil {
		v, err = b.clone(ctx, agent, name, src, size, req.GetCapacityRange())
	} else {
		v, err = agent.CreateVolume(ctx, volumes.CreateRequest{Name: name, SizeBytes: size, Tuning: t})
	}
	if err != nil {
		return nil, agentError(err, "volume "+req.GetName())
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      VolumeID{StorageClass: sc.Name, Name: v.Name}.String(),
		CapacityBytes: v.SizeBytes,
		VolumeContext: map[string]string{BackendContext: backendBtrfs},
		ContentSource: req.GetVolumeContentSource(),
	}}, nil
}

// clone makes a volume from a snapshot or volume of the same agent.
func (b *btrfsBackend) clone(ctx context.Context, agent *volumeapi.Client, name string, src *csi.VolumeContentSource, size int64, r *csi.CapacityRange) (volumes.Volume, error) {
	var source volumes.Source
	var sourceID string
	switch {
	case src.GetSnapshot() != nil:
		sourceID = src.GetSnapshot().GetSnapshotId()
	case src.GetVolume() != nil:
		sourceID = src.GetVolume().GetVolumeId()
	default:
		return volumes.Volume{}, status.Error(codes.InvalidArgument, "volume content source is neither a snapshot nor a volume")
	}
	id, err := ParseVolumeID(sourceID)
	if err != nil {
		return volumes.Volume{}, status.Error(codes.NotFound, err.Error())
	}
	var sourceSize int64
	if src.GetSnapshot() != nil {
		source.Snapshot = id.Name
		snap, err := agent.GetSnapshot(ctx, id.Name)
		if err != nil {
			return volumes.Volume{}, agentError(err, "source snapshot "+sourceID)
		}
		sourceSize = snap.SizeBytes
	} else {
		source.Volume = id.Name
		v, err := agent.GetVolume(ctx, id.Name)
		if err != nil {
			return volumes.Volume{}, agentError(err, "source volume "+sourceID)
		}
		sourceSize = v.SizeBytes
	}
	if limit := r.GetLimitBytes(); limit > 0 && sourceSize > limit {
		return volumes.Volume{}, status.Errorf(codes.OutOfRange, "source %s is %d bytes, more than the limit of %d", sourceID, sourceSize, limit)
	}
	return agent.Clone(ctx, volumes.CloneRequest{Name: name, Source: source, SizeBytes: max(size, sourceSize)})
}

// DeleteVolume removes the volume with its exports. A volume with
// snapshots stays (FailedPrecondition) until they are deleted: a
// snapshot is data the user asked to keep. The agent checks that under
// the lock snapshots are made with, so none made meanwhile is lost.
func (b *btrfsBackend) DeleteVolume(ctx context.Context, id VolumeID, secrets map[string]string) error {
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
func (b *btrfsBackend) ControllerExpandVolume(ctx context.Context, id VolumeID, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
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
		if v, err = agent.UpdateVolume(ctx, id.Name, volumes.UpdateRequest{SizeBytes: &size}); err != nil {
			return nil, agentError(err, "volume "+id.String())
		}
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.SizeBytes, NodeExpansionRequired: false}, nil
}

// ValidateVolumeCapabilities confirms what a btrfs volume can do: be
// mounted, by any number of nodes.
func (b *btrfsBackend) ValidateVolumeCapabilities(ctx context.Context, id VolumeID, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
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
func (b *btrfsBackend) CreateSnapshot(ctx context.Context, id VolumeID, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	agent, _, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	snap, err := agent.CreateSnapshot(ctx, volumes.SnapshotRequest{Name: objectName(req.GetName()), Volume: id.Name})
	if err != nil {
		return nil, agentError(err, "snapshot "+req.GetName())
	}
	return &csi.CreateSnapshotResponse{Snapshot: btrfsSnapshot(id.StorageClass, snap)}, nil
}

// DeleteSnapshot removes a snapshot; one already gone is done.
func (b *btrfsBackend) DeleteSnapshot(ctx context.Context, id VolumeID, secrets map[string]string) error {
	agent, _, err := b.agentFor(ctx, id, secrets)
	if err != nil {
		return err
	}
	if err := agent.DeleteSnapshot(ctx, id.Name); err != nil && volumeapi.StatusOf(err) != http.StatusNotFound {
		return agentError(err, "snapshot "+id.String())
	}
	return nil
}

// nodeAddress reads the IP of a node ID, "{name}|{ip}".
func nodeAddress(nodeID string) (name, ip string, err error) {
	name, ip, ok := strings.Cut(nodeID, "|")
	if !ok || name == "" || net.ParseIP(ip) == nil {
		return "", "", status.Errorf(codes.NotFound, "node ID %q is not {nodeName}|{nodeIP}, so no node of %s", nodeID, DriverName)
	}
	return name, ip, nil
}

// ControllerPublishVolume exports the volume to the node's address and
// tells the node where to mount it from.
func (b *btrfsBackend) ControllerPublishVolume(ctx context.Context, id VolumeID, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := btrfsCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	agent, sc, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	_, ip, err := nodeAddress(req.GetNodeId())
	if err != nil {
		// A missing volume is the worse error: it is NotFound first.
		if _, verr := agent.GetVolume(ctx, id.Name); verr != nil {
			return nil, agentError(verr, "volume "+id.String())
		}
		return nil, err
	}
	v, err := agent.AddExport(ctx, id.Name, ip)
	if err != nil {
		return nil, agentError(err, "exporting volume "+id.String()+" to "+ip)
	}
	server := sc.Parameters[NFSServerParameter]
	if server == "" {
		u, _ := url.Parse(sc.Parameters[AgentURLParameter])
		server = u.Hostname()
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{
		publishNFSServer: server, publishExportPath: v.ExportPath, publishPath: v.Path, publishNode: v.Node,
	}}, nil
}

// ControllerUnpublishVolume takes the node's export away; a volume or
// export already gone is done.
func (b *btrfsBackend) ControllerUnpublishVolume(ctx context.Context, id VolumeID, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	agent, _, err := b.agentFor(ctx, id, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	_, ip, err := nodeAddress(req.GetNodeId())
	if err != nil {
		return &csi.ControllerUnpublishVolumeResponse{}, nil // never published there
	}
	if _, err := agent.RemoveExport(ctx, id.Name, ip); err != nil && volumeapi.StatusOf(err) != http.StatusNotFound {
		return nil, agentError(err, "removing the export of "+id.String()+" to "+ip)
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// GetCapacity is the agent's free space.
func (b *btrfsBackend) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	sc, err := b.matchClass(ctx, req.GetParameters())
	if err != nil {
		return nil, err
	}
	agent, err := b.agent(ctx, sc, nil)
	if err != nil {
		return nil, err
	}
	st, err := agent.Stats(ctx)
	if err != nil {
		return nil, agentError(err, "capacity of StorageClass "+sc.Name)
	}
	free := st.Filesystem.Free
	return &csi.GetCapacityResponse{AvailableCapacity: free, MaximumVolumeSize: wrapInt64(free)}, nil
}

// eachAgent calls do once for every agent and tenant of the btrfs
// StorageClasses: classes that share both see the same volumes, which are
// given once, under the first class by name.
func (b *btrfsBackend) eachAgent(ctx context.Context, do func(sc *storagev1.StorageClass, agent *volumeapi.Client) error) error {
	classes := &storagev1.StorageClassList{}
	if err := b.c.Cache.List(ctx, classes); err != nil {
		return status.Errorf(codes.Unavailable, "listing StorageClasses: %v", err)
	}
	seen := map[string]bool{}
	for _, sc := range classes.Items {
		if sc.Provisioner != DriverName || !isBtrfs(sc.Parameters) {
			continue
		}
		agent, err := b.agent(ctx, &sc, nil)
		if err != nil {
			return err
		}
		key := agent.URL + "\x00" + agent.Token
		if seen[key] {
			continue
		}
		seen[key] = true
		if err := do(&sc, agent); err != nil {
			return err
		}
	}
	return nil
}

// listVolumes lists the volumes of every btrfs StorageClass's tenant.
func (b *btrfsBackend) listVolumes(ctx context.Context) ([]*csi.ListVolumesResponse_Entry, error) {
	var entries []*csi.ListVolumesResponse_Entry
	err := b.eachAgent(ctx, func(sc *storagev1.StorageClass, agent *volumeapi.Client) error {
		vs, err := agent.ListVolumes(ctx)
		if err != nil {
			return agentError(err, fmt.Sprintf("listing the volumes of StorageClass %s", sc.Name))
		}
		for _, v := range vs {
			entries = append(entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{
				VolumeId: VolumeID{StorageClass: sc.Name, Name: v.Name}.String(), CapacityBytes: v.SizeBytes,
				VolumeContext: map[string]string{BackendContext: backendBtrfs}}})
		}
		return nil
	})
	return entries, err
}

// listSnapshots lists the snapshots of every btrfs StorageClass's tenant.
func (b *btrfsBackend) listSnapshots(ctx context.Context) ([]*csi.Snapshot, error) {
	var snaps []*csi.Snapshot
	err := b.eachAgent(ctx, func(sc *storagev1.StorageClass, agent *volumeapi.Client) error {
		list, err := agent.ListSnapshots(ctx, "")
		if err != nil {
			return agentError(err, fmt.Sprintf("listing the snapshots of StorageClass %s", sc.Name))
		}
		for _, snap := range list {
			snaps = append(snaps, btrfsSnapshot(sc.Name, snap))
		}
		return nil
	})
	return snaps, err
}

// btrfsSnapshot is a snapshot of a class's agent as CSI names it.
func btrfsSnapshot(class string, snap volumes.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     VolumeID{StorageClass: class, Name: snap.Name}.String(),
		SourceVolumeId: VolumeID{StorageClass: class, Name: snap.Volume}.String(),
		SizeBytes:      snap.SizeBytes, CreationTime: timestamppb.New(snap.CreatedAt), ReadyToUse: true,
	}
}

// GetSnapshot reads one snapshot from its class's agent.
func (b *btrfsBackend) GetSnapshot(ctx context.Context, id VolumeID, secrets map[string]string) (*csi.GetSnapshotResponse, error) {
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

// route says whether a volume or snapshot ID is a btrfs class's. An ID
// whose class is gone cannot be told apart from an LVM volume, unless the
// call carries a tenant token: then it is a btrfs volume whose agent
// cannot be found, and the call fails rather than leave it behind.
func (b *btrfsBackend) route(ctx context.Context, volumeID string, secrets map[string]string) (VolumeID, bool, error) {
	id, err := ParseVolumeID(volumeID)
	if err != nil {
		return id, false, nil
	}
	sc, err := b.classOf(ctx, id)
	switch {
	case err == nil:
		return id, isBtrfs(sc.Parameters), nil
	case apierrors.IsNotFound(err) && secrets[TokenKey] != "":
		return id, false, status.Errorf(codes.FailedPrecondition,
			"StorageClass %s, which says where the agent of %s is, is gone: create it again (its agentURL may change)", id.StorageClass, volumeID)
	case apierrors.IsNotFound(err):
		return id, false, nil
	}
	return id, false, status.Errorf(codes.Unavailable, "StorageClass %s: %v", id.StorageClass, err)
}
