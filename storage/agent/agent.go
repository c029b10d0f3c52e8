package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/storage/agent/disks"
	"github.com/strata-gitops/strata/storage/agent/lvmpairs"
	"github.com/strata-gitops/strata/storage/agent/nodeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/lvm"
	"github.com/strata-gitops/strata/storage/lvmcluster/volumegroups"
)

// Options configure one node's agent.
type Options struct {
	NodeName  string
	Namespace string // where the LVMClusters and the node's status live
	// Backend is lvm2, or loopback, which keeps logical volumes in loop
	// files and is only ever used when named.
	Backend       string
	LoopbackDir   string
	MinDeviceSize uint64
	// DiscoverLoopDir: see volumegroups.Reconciler.DiscoverLoopDir.
	DiscoverLoopDir string
	FullThreshold   float64
	MetricsAddr     string
	HealthProbeAddr string
	// APISocket is where the CSI node service reaches the agent; empty
	// serves no API.
	APISocket string
	// PairsDir holds the LVM mover's pairs (docs/failover.md); empty
	// replicates no LVM volume. PairsAPI serves them to the controller
	// and to peers.
	PairsDir string
	PairsAPI volumeapi.Options
	// PairsController, when set, is the controller's service account
	// user name: the only caller the pair routes take, by its token
	// reviewed with the API server, as tenant PairsTenant. Empty takes
	// the tenants' tokens (PairsAPI's tenants flags).
	PairsController, PairsTenant string
	// PairsOpened, when set, is given the store of pairs: the agent's
	// self-fencing acts on it.
	PairsOpened func(*lvmpairs.Store)
	// ImageVolumeGroup and ImageThinPool are where image jobs on the
	// pair API (PairsAPI.Images) make their logical volumes.
	ImageVolumeGroup, ImageThinPool string
}

// Defaults are the agent's flag defaults. The agent runs on the host's
// network, so its metrics listen on localhost unless told otherwise:
// they name the node's devices and volumes.
func Defaults() Options {
	return Options{NodeName: os.Getenv("NODE_NAME"), Namespace: "strata-system", Backend: "lvm2",
		LoopbackDir: "/var/lib/strata/loopback", MinDeviceSize: 1 << 30, FullThreshold: 90,
		MetricsAddr: "127.0.0.1:8082", HealthProbeAddr: ":8083",
		APISocket: "/run/strata/agent.sock"}
}

// VolumeManager returns the backend the options name. The loopback
// manager is never chosen for the user: production data must not land
// in loop files because a kernel lacks device-mapper.
func VolumeManager(o Options) (lvm.Manager, error) {
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

// NewManager assembles the agent: the volume-group and LogicalVolume
// reconcilers of one node.
func NewManager(ctx context.Context, cfg *rest.Config, o Options) (manager.Manager, error) {
	if o.NodeName == "" {
		return nil, fmt.Errorf("the agent needs its node's name: set --node-name or NODE_NAME (the downward API's spec.nodeName)")
	}
	m, err := VolumeManager(o)
	if err != nil {
		return nil, err
	}
	ctrl.Log.Info("volume manager", "backend", o.Backend, "node", o.NodeName)
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.HealthProbeAddr,
	})
	if err != nil {
		return nil, err
	}
	events := mgr.GetEventRecorder("strata-agent")
	vg := &volumegroups.Reconciler{Client: mgr.GetClient(), Node: o.NodeName, Namespace: o.Namespace, LVM: m,
		NoDeviceMapper: o.Backend == "lvm2" && !lvm.KernelHasDeviceMapper(),
		Disks:          disks.NewInspector(m), MinDeviceSize: o.MinDeviceSize, DiscoverLoopDir: o.DiscoverLoopDir, FullThreshold: o.FullThreshold, Events: events}
	if err := vg.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	lv := &LogicalVolumeReconciler{Client: mgr.GetClient(), Node: o.NodeName, LVM: m, Events: events,
		Classes: ClusterClasses{Client: mgr.GetClient(), Namespace: o.Namespace}}
	if err := lv.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := restoreFences(ctx, m, o.PairsDir); err != nil {
		return nil, err
	}
	if o.APISocket != "" {
		api := &nodeapi.Server{LVM: m, ManagedTag: volumegroups.ManagedTag, Locate: locator(mgr.GetClient(), lv.Classes)}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return nodeapi.Serve(ctx, o.APISocket, api) })); err != nil {
			return nil, err
		}
	}
	if o.PairsDir != "" {
		pairs := &lvmpairs.Store{LVM: m, Dir: o.PairsDir}
		if o.PairsOpened != nil {
			o.PairsOpened(pairs)
		}
		if o.PairsAPI.Images.Dir != "" && o.ImageVolumeGroup == "" {
			return nil, fmt.Errorf("--image-dir on a node agent needs --image-volume-group: the volume group image jobs make their volumes in")
		}
		images := provision.LVMVolumes{LVM: m, Group: o.ImageVolumeGroup, Pool: o.ImageThinPool}
		o.PairsAPI.Events, o.PairsAPI.Node = events, o.NodeName
		if o.PairsController != "" {
			o.PairsAPI.Controller = &volumeapi.ControllerCaller{Client: mgr.GetClient(), Identity: o.PairsController, Tenant: o.PairsTenant}
		}
		serve := func(ctx context.Context) error {
			return volumeapi.RunPairs(ctx, mgr.GetAPIReader(), o.PairsAPI, pairs, images)
		}
		if err := mgr.Add(manager.RunnableFunc(serve)); err != nil {
			return nil, err
		}
	}
	if o.HealthProbeAddr != "" && o.HealthProbeAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// restoreFences sets again the fences of the replicated volumes in dir
// (none without it), before anything can mount a volume: a fence
// survives a reboot.
func restoreFences(ctx context.Context, m lvm.Manager, dir string) error {
	if dir == "" {
		return nil
	}
	restored, err := (&lvmpairs.Store{LVM: m, Dir: dir}).RestoreFences(ctx)
	if err != nil {
		return fmt.Errorf("restoring the fences of replicated volumes: %w; the agent serves nothing until they hold", err)
	}
	if len(restored) > 0 {
		log.FromContext(ctx).Info("restored the fences of replicated volumes after a restart", "volumes", restored)
	}
	return nil
}

// locator says where a LogicalVolume's volume is meant to be, from the
// object in the manager's cache.
func locator(c client.Reader, classes ClassResolver) func(ctx context.Context, name string) (string, string, bool) {
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
