package agent

import (
	"context"
	"fmt"
	"path/filepath"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/disks"
	"github.com/strata-gitops/strata/storage/agent/lvmnode"
	"github.com/strata-gitops/strata/storage/agent/lvmnode/volumegroups"
	"github.com/strata-gitops/strata/storage/agent/nodeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/lvm"
)

// LVMOptions configure the LVM side of a node's agent.
type LVMOptions struct {
	// Enabled reconciles LVMClusters and LogicalVolumes for this node;
	// false on a host that serves only btrfs volumes.
	Enabled bool
	// Backend is lvm2, or loopback, which keeps logical volumes in loop
	// files and is only ever used when named.
	Backend       string
	LoopbackDir   string
	MinDeviceSize uint64
	// DiscoverLoopDir: see volumegroups.Reconciler.DiscoverLoopDir.
	DiscoverLoopDir string
	FullThreshold   float64
	// APISocket is where the CSI node service reaches the agent; empty
	// serves no API.
	APISocket string
	// PairsDir holds the LVM mover's pairs (docs/failover.md); empty
	// replicates no LVM volume. PairsListen serves them to the
	// controller and to peers, with the agent's API options.
	PairsDir, PairsListen string
	// PairsController, when set, is the controller's service account
	// user name: the only caller the pair routes take, by its token
	// reviewed with the API server, as tenant PairsTenant. Empty takes
	// the tenants' tokens.
	PairsController, PairsTenant string
	// ImageVolumeGroup and ImageThinPool are where image jobs on the
	// pair API make their logical volumes.
	ImageVolumeGroup, ImageThinPool string
}

// VolumeManager returns the backend the options name. The loopback
// manager is never chosen for the user: production data must not land
// in loop files because a kernel lacks device-mapper.
func VolumeManager(o LVMOptions) (lvm.Manager, error) {
	switch o.Backend {
	case "lvm2":
		return lvm.NewLVM2(), nil
	case "loopback":
		return lvm.NewLoopback(filepath.Clean(o.LoopbackDir))
	case "auto":
		return nil, fmt.Errorf("--backend auto is gone: it chose loop files where the kernel lacks device-mapper; " +
			"use lvm2, or name loopback for a development machine")
	}
	return nil, fmt.Errorf("--backend %q: use lvm2, or loopback for a development machine", o.Backend)
}

// addLVM adds the LVM side: the volume-group and LogicalVolume
// reconcilers of the node, its local API, and the LVM mover's pairs.
func (a *Agent) addLVM(ctx context.Context, o Options) error {
	m, err := VolumeManager(o.LVM)
	if err != nil {
		return err
	}
	ctrl.Log.Info("volume manager", "backend", o.LVM.Backend, "node", o.Node)
	vg := &volumegroups.Reconciler{Client: a.client, Node: o.Node, Namespace: o.Namespace, LVM: m,
		NoDeviceMapper: o.LVM.Backend == "lvm2" && !lvm.KernelHasDeviceMapper(),
		Disks:          disks.NewInspector(m), MinDeviceSize: o.LVM.MinDeviceSize, DiscoverLoopDir: o.LVM.DiscoverLoopDir,
		FullThreshold: o.LVM.FullThreshold, Events: a.events}
	if err := vg.SetupWithManager(a.mgr); err != nil {
		return err
	}
	lv := &lvmnode.LogicalVolumeReconciler{Client: a.client, Node: o.Node, LVM: m, Events: a.events,
		Classes: lvmnode.ClusterClasses{Client: a.client, Namespace: o.Namespace}}
	if err := lv.SetupWithManager(a.mgr); err != nil {
		return err
	}
	if o.LVM.APISocket != "" {
		api := &nodeapi.Server{LVM: m, ManagedTag: volumegroups.ManagedTag, Locate: locator(a.client, lv.Classes)}
		a.run(func(ctx context.Context) error { return nodeapi.Serve(ctx, o.LVM.APISocket, api) })
	}
	if o.LVM.PairsDir == "" {
		return nil
	}
	pairs := &lvmnode.Store{LVM: m, Dir: o.LVM.PairsDir}
	if err := restoreFences(ctx, pairs); err != nil {
		return err
	}
	a.fencers = append(a.fencers, pairs)
	images := provision.LVMVolumes{LVM: m, Group: o.LVM.ImageVolumeGroup, Pool: o.LVM.ImageThinPool}
	a.run(func(ctx context.Context) error { return a.servePairs(ctx, o, pairs, images) })
	return nil
}

// restoreFences sets again the fences of the replicated volumes, before
// anything can mount a volume: a fence survives a reboot.
func restoreFences(ctx context.Context, pairs *lvmnode.Store) error {
	restored, err := pairs.RestoreFences(ctx)
	if err != nil {
		return fmt.Errorf("restoring the fences of replicated volumes: %w; the agent serves nothing until they hold", err)
	}
	if len(restored) > 0 {
		log.FromContext(ctx).Info("restored the fences of replicated volumes after a restart", "volumes", restored)
	}
	return nil
}

// servePairs serves the LVM mover's pair and replica routes alone, with
// the agent's TLS and tenants, and image jobs that fill logical volumes
// when o.Images.Dir is set.
func (a *Agent) servePairs(ctx context.Context, o Options, pairs *lvmnode.Store, images provision.Volumes) error {
	served, err := o.served(ctx, a.reader, a.client)
	if err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithName("pairs")
	go reloadTenants(ctx, served.tenants, served.load, o.API.SyncInterval, logger)
	logger.Info("serving the pair API", "listen", o.LVM.PairsListen, "tls", served.tls != nil, "tenants", len(served.byTenant))
	server := volumeapi.NewPairServer(pairs, served.tenants)
	server.PeerHTTP, server.Peers = served.peerHTTP, served.peers(a.reader)
	if o.LVM.PairsController != "" {
		server.Controller = &volumeapi.ControllerCaller{Client: a.client, Identity: o.LVM.PairsController, Tenant: o.LVM.PairsTenant, Node: o.Node}
	}
	if o.Images.Dir != "" {
		if server.Images, err = o.Images.open(ctx, a.reader, images, a.notice(o, logger, imageEventType)); err != nil {
			return err
		}
	}
	return serve(ctx, o.LVM.PairsListen, served, server)
}

// locator says where a LogicalVolume's volume is meant to be, from the
// object in the manager's cache.
func locator(c client.Reader, classes lvmnode.ClassResolver) func(ctx context.Context, name string) (string, string, bool) {
	return func(ctx context.Context, name string) (string, string, bool) {
		obj := &storagev1alpha1.LogicalVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return "", "", false
		}
		where, err := classes.Resolve(ctx, obj.Spec.DeviceClass)
		if err != nil {
			return "", "", false
		}
		return where.VolumeGroup, obj.Spec.Name, true
	}
}
