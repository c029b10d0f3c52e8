package main

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/strata-gitops/strata/storage/agent"
)

func agentCommand() *cobra.Command {
	o := agent.Defaults()
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node's storage agent (volume groups and logical volumes of one node)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New())
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			ctx := ctrl.SetupSignalHandler()
			mgr, err := agent.NewManager(ctx, cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	f.StringVar(&o.NodeName, "node-name", o.NodeName, "this node's name (default: $NODE_NAME)")
	f.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the LVMClusters and of this node's LVMVolumeGroupNodeStatus")
	f.StringVar(&o.Backend, "backend", o.Backend, "volume manager: lvm2, loopback (logical volumes as loop-device files, for kernels without device-mapper) or auto")
	f.StringVar(&o.LoopbackDir, "loopback-dir", o.LoopbackDir, "where the loopback backend keeps volume files")
	f.Uint64Var(&o.MinDeviceSize, "min-device-size", o.MinDeviceSize, "smallest device, in bytes, a device class uses")
	f.StringVar(&o.DiscoverLoopDir, "discover-loop-devices-under", o.DiscoverLoopDir,
		"for development machines: loop devices whose backing file is under this directory count as disks for device classes without paths")
	f.Float64Var(&o.FullThreshold, "thin-pool-full-percent", o.FullThreshold, "data or metadata use of a thin pool, in percent, above which it takes no new volume")
	f.StringVar(&o.APISocket, "api-socket", o.APISocket, "unix socket of the local API the CSI node service uses; empty to serve none")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus metrics endpoint, 0 to disable")
	f.StringVar(&o.HealthProbeAddr, "health-probe-bind-address", o.HealthProbeAddr, "address of the /healthz and /readyz probes, 0 to disable")
	return cmd
}
