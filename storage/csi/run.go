package csi

import (
	"context"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/storage/csi/resizer"

	"golang.org/x/sync/errgroup"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/nodeapi"
)

// Options configure one `strata csi` process.
type Options struct {
	// Mode is controller or node.
	Mode     string
	Endpoint string
	Version  string
	// Wait bounds how long a controller call waits for an agent.
	Wait time.Duration
	// Node mode: this node, and its agent's API socket.
	NodeName, NodeIP string
	AgentSocket      string
	// BtrfsBase is the btrfs volume agent's base on this node, if one
	// runs here: only a subvolume under it is bind-mounted directly.
	BtrfsBase string
	// Expand, in controller mode, grows volumes whose claims ask for more
	// (the work of external-resizer).
	Expand bool
	// RegistrationDir, in node mode, is the kubelet's plugins_registry
	// directory: the node service registers itself with the kubelet there,
	// at KubeletEndpoint, its socket as the kubelet sees it.
	RegistrationDir, KubeletEndpoint string
}

// Defaults are the flag defaults of `strata csi`.
func Defaults() Options {
	return Options{Mode: "controller", Endpoint: "unix:///csi/csi.sock", Wait: 60 * time.Second,
		NodeName: os.Getenv("NODE_NAME"), NodeIP: os.Getenv("NODE_IP"), AgentSocket: "/run/strata/agent.sock", Expand: true}
}

// Run serves the Identity service and, by mode, the Controller or the
// Node service until ctx ends. cfg is needed in controller mode only.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	identity := &Identity{Version: o.Version}
	switch o.Mode {
	case "controller":
		if cfg == nil {
			return fmt.Errorf("controller mode needs a Kubernetes API: set --kubeconfig or run in a cluster")
		}
		c, err := NewController(ctx, cfg, o.Wait)
		if err != nil {
			return err
		}
		identity.Ready = func(ctx context.Context) error {
			return c.Client.List(ctx, &storagev1alpha1.LogicalVolumeList{}, client.Limit(1))
		}
		if !o.Expand {
			return Serve(ctx, o.Endpoint, identity, c, nil)
		}
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return Serve(ctx, o.Endpoint, identity, c, nil) })
		g.Go(func() error { return runResizer(ctx, cfg, c) })
		return g.Wait()
	case "node":
		if o.NodeName == "" {
			return fmt.Errorf("node mode needs the node's name: set --node-name or NODE_NAME (the downward API's spec.nodeName)")
		}
		agent, err := nodeapi.Dial(o.AgentSocket)
		if err != nil {
			return err
		}
		defer agent.Close()
		node := &Node{Name: o.NodeName, IP: o.NodeIP, Agent: agent, Mounter: NewMounter(), BtrfsBase: o.BtrfsBase}
		if cfg != nil {
			if node.Pods, err = client.New(cfg, client.Options{}); err != nil {
				return err
			}
		}
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return Serve(ctx, o.Endpoint, identity, nil, node) })
		if o.RegistrationDir != "" {
			g.Go(func() error { return serveRegistration(ctx, o.RegistrationDir, o.KubeletEndpoint) })
		}
		return g.Wait()
	}
	return fmt.Errorf("--mode %q: use controller or node", o.Mode)
}

// runResizer grows the driver's volumes whose claims ask for more, until
// ctx ends.
func runResizer(ctx context.Context, cfg *rest.Config, c *Controller) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return err
	}
	r := &resizer.Reconciler{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Events: mgr.GetEventRecorder("strata-csi-resizer"),
		Driver: DriverName, Expand: c.ControllerExpandVolume}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
