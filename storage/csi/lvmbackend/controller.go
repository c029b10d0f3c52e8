// Package lvmbackend is the CSI driver's backend for LVM volumes: each
// volume or snapshot is a LogicalVolume object that its node's agent makes
// real in a volume group, and the node side mounts the device the agent
// names. See docs/csi.md.
package lvmbackend

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// Controller keeps volumes as LogicalVolume objects that each node's
// agent makes real in its volume groups. Its LogicalVolume service
// (logicalvolumes.go) creates them, waits for their agents, and is woken
// by changes instead of polling.
type Controller struct {
	// Client writes, and reads what must be current.
	Client client.Client
	// Cache reads LogicalVolumes, LVMClusters and Nodes from informers.
	Cache client.Reader
	// Wait bounds how long a call waits for an agent. The CO retries a
	// call that timed out, and the retry finds the object made before.
	Wait    time.Duration
	changes *notifier
}

// New is the LVM backend over a client and the informers its cache reads
// from; each LogicalVolume change wakes the calls waiting for it.
func New(ctx context.Context, c client.Client, informers cache.Cache, wait time.Duration) (*Controller, error) {
	b := &Controller{Client: c, Cache: informers, Wait: wait, changes: newNotifier()}
	volumes, err := informers.GetInformer(ctx, &storagev1alpha1.LogicalVolume{})
	if err != nil {
		return nil, err
	}
	changed := func(obj any) {
		if key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			b.changes.changed(key)
		}
	}
	if _, err := volumes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: changed, DeleteFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) },
	}); err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&storagev1alpha1.LVMCluster{}, &corev1.Node{}} {
		if _, err := informers.GetInformer(ctx, obj); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Labels and annotations the controller service puts on LogicalVolumes.
const (
	// KindLabel tells volumes from snapshots, so that a snapshot is
	// never deleted through DeleteVolume and the other way round.
	KindLabel = "storage.strata.dev/csi-kind"
	// NameAnnotation keeps the name the CO gave, which may be longer
	// than an object name.
	NameAnnotation = "storage.strata.dev/csi-name"
	// StorageClassAnnotation keeps the StorageClass a volume was made
	// through, the first part of its ID, for ListVolumes.
	StorageClassAnnotation = "storage.strata.dev/csi-storage-class"

	kindVolume   = "volume"
	kindSnapshot = "snapshot"
)

// CreateVolume makes a LogicalVolume on a node the class selects, the
// topology allows and that has room, then waits for its agent.
func (b *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	class, err := findClass(ctx, b.Cache, req.GetParameters()[storagev1alpha1.DeviceClassParameter])
	if err != nil {
		return nil, err
	}
	size, err := volumeSize(req.GetCapacityRange(), minimumSize(req.GetVolumeCapabilities()))
	if err != nil {
		return nil, err
	}
	source, err := b.contentSource(ctx, req.GetVolumeContentSource())
	if err != nil {
		return nil, err
	}
	want := newLogicalVolume(req.GetName(), kindVolume, class.Name, size)
	sc := req.GetParameters()[storagev1alpha1.StorageClassParameter]
	if sc == "" {
		sc = storagev1alpha1.StorageClassName(class.Name)
	}
	want.Annotations[StorageClassAnnotation] = sc
	if source != nil {
		if class.ThinPoolConfig == nil {
			return nil, status.Errorf(codes.InvalidArgument, "device class %s is thick: a volume made from a snapshot or another volume needs a thin class",
				class.Name)
		}
		if err := fitsSource(want, source, req.GetCapacityRange()); err != nil {
			return nil, err
		}
	}
	lv, err := b.getOrCreate(ctx, want, req.GetCapacityRange(), func() (string, error) {
		if source != nil {
			return source.Spec.NodeName, allowed(source.Spec.NodeName, req.GetAccessibilityRequirements())
		}
		return placeVolume(ctx, b.Cache, class.Name, size.Value(), req.GetAccessibilityRequirements())
	})
	if err != nil {
		return nil, err
	}
	if lv, err = b.waitCreated(ctx, lv); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           backend.VolumeID{StorageClass: sc, Name: lv.Name}.String(),
		CapacityBytes:      lv.Status.CurrentSize.Value(),
		VolumeContext:      map[string]string{storagev1alpha1.DeviceClassParameter: class.Name},
		ContentSource:      req.GetVolumeContentSource(),
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{backend.TopologyKey: lv.Spec.NodeName}}},
	}}, nil
}

// newLogicalVolume is the object for a CSI volume or snapshot name.
func newLogicalVolume(csiName, kind, class string, size resource.Quantity) *storagev1alpha1.LogicalVolume {
	name := backend.ObjectName(csiName)
	return &storagev1alpha1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{KindLabel: kind},
			Annotations: map[string]string{NameAnnotation: csiName},
			// Set now, it spares the agent a write before it can start.
			Finalizers: []string{storagev1alpha1.LogicalVolumeFinalizer}},
		Spec: storagev1alpha1.LogicalVolumeSpec{Name: name, DeviceClass: class, Size: size},
	}
}

// contentSource is the LogicalVolume a new volume starts from, if any.
func (b *Controller) contentSource(ctx context.Context, src *csi.VolumeContentSource) (*storagev1alpha1.LogicalVolume, error) {
	switch {
	case src == nil:
		return nil, nil
	case src.GetSnapshot() != nil:
		return b.lookup(ctx, src.GetSnapshot().GetSnapshotId(), kindSnapshot)
	case src.GetVolume() != nil:
		return b.lookup(ctx, src.GetVolume().GetVolumeId(), kindVolume)
	}
	return nil, status.Error(codes.InvalidArgument, "volume content source is neither a snapshot nor a volume")
}

// fitsSource makes want a copy of source: on its node, in its class, at
// least its size.
func fitsSource(want, source *storagev1alpha1.LogicalVolume, r *csi.CapacityRange) error {
	if source.Spec.DeviceClass != want.Spec.DeviceClass {
		return status.Errorf(codes.InvalidArgument, "source %s is in device class %s, the new volume in %s: a copy stays in its source's class",
			source.Name, source.Spec.DeviceClass, want.Spec.DeviceClass)
	}
	if want.Spec.Size.Cmp(source.Spec.Size) < 0 {
		if limit := r.GetLimitBytes(); limit > 0 && limit < source.Spec.Size.Value() {
			return status.Errorf(codes.OutOfRange, "source %s is %s, more than the limit of %d bytes", source.Name, source.Spec.Size.String(), limit)
		}
		want.Spec.Size = source.Spec.Size
	}
	want.Spec.Source = source.Name
	return nil
}

// getOrCreate returns the LogicalVolume of want's name, creating it on the
// node place picks if there is none. An existing one must be what was
// asked for, or the call fails with AlreadyExists.
func (b *Controller) getOrCreate(ctx context.Context, want *storagev1alpha1.LogicalVolume, r *csi.CapacityRange, place func() (string, error)) (*storagev1alpha1.LogicalVolume, error) {
	have := &storagev1alpha1.LogicalVolume{}
	err := b.Cache.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		if want.Spec.NodeName == "" {
			if want.Spec.NodeName, err = place(); err != nil {
				return nil, err
			}
		}
		err = b.Client.Create(ctx, want)
		if err == nil {
			return want, nil
		}
		if apierrors.IsAlreadyExists(err) { // a concurrent call made it
			err = b.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
		}
	}
	if err != nil {
		return nil, apiError(err, want.Name)
	}
	if err := sameRequest(have, want, r); err != nil {
		return nil, err
	}
	return have, nil
}

// sameRequest says whether an existing object answers a repeated call.
func sameRequest(have, want *storagev1alpha1.LogicalVolume, r *csi.CapacityRange) error {
	differs := func(what string) error {
		return status.Errorf(codes.AlreadyExists, "%s %q exists with another %s", have.Labels[KindLabel], have.Annotations[NameAnnotation], what)
	}
	switch {
	case have.Labels[KindLabel] != want.Labels[KindLabel]:
		return status.Errorf(codes.AlreadyExists, "the name %q is taken by a %s", want.Annotations[NameAnnotation], have.Labels[KindLabel])
	case have.Annotations[NameAnnotation] != want.Annotations[NameAnnotation]:
		return status.Errorf(codes.AlreadyExists, "LogicalVolume %s belongs to %q", have.Name, have.Annotations[NameAnnotation])
	case have.Spec.DeviceClass != want.Spec.DeviceClass:
		return differs("device class")
	case have.Spec.Source != want.Spec.Source:
		return differs("source")
	case have.Spec.Size.Cmp(want.Spec.Size) < 0,
		r.GetLimitBytes() > 0 && have.Spec.Size.Value() > r.GetLimitBytes():
		return differs("size (" + have.Spec.Size.String() + ")")
	}
	return nil
}

// DeleteVolume removes the volume's LogicalVolume and waits for its agent.
func (b *Controller) DeleteVolume(ctx context.Context, _ backend.VolumeID, req *csi.DeleteVolumeRequest) error {
	return b.remove(ctx, req.GetVolumeId(), kindVolume)
}

// remove deletes the object of a volume or snapshot ID and waits until it
// is gone. An ID that names nothing of this kind is already gone.
func (b *Controller) remove(ctx context.Context, id, kind string) error {
	lv, err := b.lookup(ctx, id, kind)
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	err = b.Client.Delete(ctx, lv, client.Preconditions{UID: &lv.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return apiError(err, lv.Name)
	}
	_, err = b.waitFor(ctx, lv.Name, func(lv *storagev1alpha1.LogicalVolume) (bool, error) { return lv == nil, nil })
	return err
}

// ControllerExpandVolume raises the LogicalVolume's size and waits for its
// agent to grow the volume.
func (b *Controller) ControllerExpandVolume(ctx context.Context, _ backend.VolumeID, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	size, err := volumeSize(req.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	lv, err := b.lookup(ctx, req.GetVolumeId(), kindVolume)
	if err != nil {
		return nil, err
	}
	if lv.Spec.Size.Cmp(size) < 0 {
		patch := client.MergeFrom(lv.DeepCopy())
		lv.Spec.Size = size
		if err := b.Client.Patch(ctx, lv, patch); err != nil {
			return nil, apiError(err, lv.Name)
		}
	}
	if lv, err = b.waitReady(ctx, lv); err != nil {
		return nil, err
	}
	block := req.GetVolumeCapability().GetBlock() != nil
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: lv.Status.CurrentSize.Value(), NodeExpansionRequired: !block}, nil
}

// ValidateVolumeCapabilities confirms what an LVM volume can be.
func (b *Controller) ValidateVolumeCapabilities(ctx context.Context, _ backend.VolumeID, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if _, err := b.lookup(ctx, req.GetVolumeId(), kindVolume); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}
