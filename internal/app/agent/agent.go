// Package agent assembles a node's agent, and is the one place that does.
// An agent is up to two backends, each with its HTTP API, and the node's
// liveness:
//   - the LVM side (lvm.go): volume groups and thin pools from
//     LVMClusters, LogicalVolumes made real, the local API the CSI node
//     service asks for devices, and the LVM mover's pair API;
//   - the btrfs side (btrfs.go): tenants' volumes under a btrfs base on
//     the volume API, with NFS exports and image jobs;
//   - the node's Lease and the self-fence over both backends' pairs
//     (liveness.go).
//
// strata agent, the CSI test environment and the local node stack
// (stack.go) all build through New; a subcommand only parses flags.
package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/strata-gitops/strata/internal/fluxevents"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/storage/agent/contract"
)

// Options configure one node's agent.
type Options struct {
	Node string
	// Namespace holds the LVMClusters, the node's status and its Lease.
	Namespace string
	LVM       LVMOptions
	Btrfs     BtrfsOptions
	// API is the TLS and tenants of the agent's HTTP APIs: the btrfs
	// volume API and the LVM pair API.
	API    APIOptions
	Images ImageOptions
	// MetricsAddr and HealthProbeAddr are the LVM side's manager's.
	MetricsAddr, HealthProbeAddr string
	// LeasePeriod is how often the node's Lease is renewed.
	LeasePeriod time.Duration
	// SelfFenceAfter fences the replicated volumes once the Lease has
	// gone this long past its last RenewTime; 0 never fences.
	SelfFenceAfter time.Duration
	// EventsAddr is where the agent's events are also posted in Flux's
	// format (the controller's alerts endpoint, or Flux's
	// notification-controller); empty: Kubernetes events only.
	EventsAddr string
}

// Defaults are the agent's flag defaults. The agent runs on the host's
// network, so its metrics listen on localhost unless told otherwise:
// they name the node's devices and volumes.
func Defaults() Options {
	return Options{Node: os.Getenv("NODE_NAME"), Namespace: "strata-system",
		LVM: LVMOptions{Enabled: true, Backend: "lvm2", LoopbackDir: "/var/lib/strata/loopback", MinDeviceSize: 1 << 30,
			FullThreshold: 90, APISocket: "/run/strata/agent.sock", PairsListen: ":8421", PairsTenant: "strata"},
		Btrfs: BtrfsOptions{Listen: ":8420", Exporter: "ganesha", GaneshaExports: "/etc/ganesha/strata-exports.conf",
			GaneshaPID: "/run/ganesha/ganesha.pid"},
		API:         APIOptions{TenantsEnv: os.Getenv("AGENT_TENANTS"), SyncInterval: time.Minute},
		MetricsAddr: "127.0.0.1:8082", HealthProbeAddr: ":8083",
		LeasePeriod: 2 * time.Second, SelfFenceAfter: 6 * time.Second}
}

// check refuses options that cannot make an agent, before anything runs.
func (o Options) check() error {
	switch {
	case o.Node == "":
		return fmt.Errorf("the agent needs its node's name: set --node-name or NODE_NAME (the downward API's spec.nodeName)")
	case !o.LVM.Enabled && o.Btrfs.Base == "":
		return fmt.Errorf("--lvm=false leaves nothing to do without --btrfs-base")
	case o.LVM.PairsDir != "" && o.Btrfs.Base != "" && o.Images.Dir != "":
		return fmt.Errorf("--image-dir with both --btrfs-base and --pairs-dir: image jobs fill one kind of volume; run the btrfs volume API in its own agent (--lvm=false)")
	case o.LVM.Enabled && o.LVM.PairsDir != "" && o.Images.Dir != "" && o.LVM.ImageVolumeGroup == "":
		return fmt.Errorf("--image-dir on a node agent needs --image-volume-group: the volume group image jobs make their volumes in")
	}
	return nil
}

// Agent is a node's agent, assembled; Start runs it.
type Agent struct {
	// mgr runs the LVM side's reconcilers and every other part; nil on
	// a btrfs host, whose parts run side by side without one.
	mgr   manager.Manager
	parts []manager.Runnable
	// client and reader reach the Kubernetes API; nil without one (a
	// btrfs host may run without).
	client client.Client
	reader client.Reader
	events events.EventRecorder
	// fencers are the backends whose pairs the self-fence fences.
	fencers []contract.Fencer
}

// New assembles the agent o describes. cfg may be nil for a btrfs host
// alone, which then keeps no Lease and never fences itself.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Agent, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	a := &Agent{}
	if err := a.connect(cfg, o); err != nil {
		return nil, err
	}
	if o.LVM.Enabled {
		if err := a.addLVM(ctx, o); err != nil {
			return nil, err
		}
	}
	if o.Btrfs.Base != "" {
		a.addBtrfs(o)
	}
	if a.client != nil {
		a.addLiveness(o)
	} else {
		ctrl.Log.Info("no Kubernetes API: no node Lease and no self-fencing")
	}
	return a, nil
}

// connect reaches the Kubernetes API: through a manager when the LVM side
// runs, which needs its caches, or a plain client on a btrfs host.
func (a *Agent) connect(cfg *rest.Config, o Options) error {
	switch {
	case cfg == nil && (o.LVM.Enabled || o.API.TenantsSecret != ""):
		return fmt.Errorf("the agent needs a Kubernetes API for LVMClusters or --tenants-secret: set --kubeconfig or run in a cluster")
	case cfg == nil:
		return nil
	case !o.LVM.Enabled:
		c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			return err
		}
		a.client, a.reader = c, c
		return a.recordEvents(cfg, o)
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.HealthProbeAddr,
	})
	if err != nil {
		return err
	}
	if o.HealthProbeAddr != "" && o.HealthProbeAddr != "0" {
		if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("ping", healthz.Ping)); err != nil {
			return err
		}
	}
	rec, err := fluxevents.New(mgr.GetEventRecorder("strata-agent"), mgr.GetScheme(), mgr.GetLogger(), o.EventsAddr, "strata-agent")
	if err != nil {
		return err
	}
	a.mgr, a.client, a.reader, a.events = mgr, mgr.GetClient(), mgr.GetAPIReader(), rec
	return nil
}

// run adds a part that runs until ctx ends.
func (a *Agent) run(part func(ctx context.Context) error) {
	a.parts = append(a.parts, manager.RunnableFunc(part))
}

// Start runs every part until ctx ends or one fails.
func (a *Agent) Start(ctx context.Context) error {
	if a.mgr != nil {
		for _, p := range a.parts {
			if err := a.mgr.Add(p); err != nil {
				return err
			}
		}
		return a.mgr.Start(ctx)
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, p := range a.parts {
		g.Go(func() error { return p.Start(ctx) })
	}
	return g.Wait()
}
