// Package nodecmd holds the commands a node runs, which both strata and
// the lean strata-node binary serve: the storage agent, the CSI driver's
// services and the image jobs' client.
package nodecmd

import (
	"github.com/spf13/cobra"
	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/cmd/internal/cli"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/internal/app/agent"
	"github.com/strata-gitops/strata/storage/images/provision"
)

// Agent runs a node's storage agent.
func Agent() *cobra.Command {
	o := agent.Defaults()
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node's storage agent: volume groups and logical volumes (LVM), and the btrfs volume API with NFS exports",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(cli.NewLogger())
			ctx := ctrl.SetupSignalHandler()
			cfg, err := cli.RestConfig(kubeconfig)
			if err != nil && (o.LVM.Enabled || o.API.TenantsSecret != "") {
				return err
			}
			a, err := agent.New(ctx, cfg, o)
			if err != nil {
				return err
			}
			return a.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	f.StringVar(&o.Node, "node-name", o.Node, "this node's name (default: $NODE_NAME)")
	f.StringVar(&o.EventsAddr, "events-addr", o.EventsAddr,
		"where the agent's events (a full thin pool, a volume group's failures) are also posted in Flux's format: the controller's alerts endpoint or Flux's notification-controller; empty: Kubernetes events only")
	f.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the LVMClusters and of this node's LVMVolumeGroupNodeStatus")
	f.StringVar(&o.LVM.Backend, "backend", o.LVM.Backend, "volume manager: lvm2, or loopback (logical volumes as loop-device files, for development machines whose kernel lacks device-mapper; only when named)")
	f.StringVar(&o.LVM.LoopbackDir, "loopback-dir", o.LVM.LoopbackDir, "where the loopback backend keeps volume files")
	f.Uint64Var(&o.LVM.MinDeviceSize, "min-device-size", o.LVM.MinDeviceSize, "smallest device, in bytes, a device class uses")
	f.StringVar(&o.LVM.DiscoverLoopDir, "discover-loop-devices-under", o.LVM.DiscoverLoopDir,
		"for development machines: loop devices whose backing file is under this directory count as disks for device classes without paths")
	f.Float64Var(&o.LVM.FullThreshold, "thin-pool-full-percent", o.LVM.FullThreshold, "data or metadata use of a thin pool, in percent, above which it takes no new volume")
	f.StringVar(&o.LVM.APISocket, "api-socket", o.LVM.APISocket, "unix socket of the local API the CSI node service uses; empty to serve none")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus metrics endpoint, 0 to disable")
	f.StringVar(&o.HealthProbeAddr, "health-probe-bind-address", o.HealthProbeAddr, "address of the /healthz and /readyz probes, 0 to disable")
	f.DurationVar(&o.LeasePeriod, "lease-period", o.LeasePeriod, "how often the node's Lease strata-node-{node} is renewed; failover reads its age (docs/failover.md)")
	f.DurationVar(&o.SelfFenceAfter, "self-fence-after", o.SelfFenceAfter, "with --btrfs-base or --pairs-dir: fence the replicated volumes (read-only, their writers killed) once the Lease has gone this long past its last RenewTime; published on the Lease, so that the controller promotes under AgentSelfFence only when its --self-fence-after covers this, a tenth of it and 500 ms. 0 never fences, and Failovers with AgentSelfFence on this node then wait for a person (docs/failover.md)")
	f.StringVar(&o.LVM.PairsDir, "pairs-dir", o.LVM.PairsDir, "directory of the LVM mover's pair records; empty replicates no LVM volume (docs/failover.md)")
	f.StringVar(&o.LVM.PairsListen, "pairs-listen", o.LVM.PairsListen, "with --pairs-dir: address of the LVM mover's pair API, with the volume API's TLS and tenants flags")
	f.StringVar(&o.LVM.PairsController, "pairs-controller", o.LVM.PairsController, "with --pairs-dir: the controller's service account user name (system:serviceaccount:NAMESPACE:NAME); the pair routes then take only its token for audience strata-agent, reviewed by the API server, and no tenant token")
	f.StringVar(&o.LVM.PairsTenant, "pairs-tenant", o.LVM.PairsTenant, "with --pairs-controller: the tenant the controller's pair calls act as")
	f.BoolVar(&o.LVM.Enabled, "lvm", o.LVM.Enabled, "reconcile LVMClusters and LogicalVolumes for this node; false on a host that serves only btrfs volumes")
	f.StringVar(&o.Btrfs.Base, "btrfs-base", o.Btrfs.Base, "directory on btrfs that holds the tenants' volumes; empty serves no btrfs volume API")
	f.Float64Var(&o.Btrfs.FullPercent, "btrfs-full-percent", 90, "with --btrfs-base: the used space (percent of the filesystem) past which a BtrfsHostFull event on the node says writes will fail, once per crossing")
	f.StringVar(&o.Btrfs.Listen, "volume-api-listen", o.Btrfs.Listen, "address of the btrfs volume HTTP API")
	f.StringVar(&o.API.TLS.Cert, "volume-api-tls-cert", o.API.TLS.Cert, "TLS certificate of the volume API (with --volume-api-tls-key)")
	f.StringVar(&o.API.TLS.Key, "volume-api-tls-key", o.API.TLS.Key, "TLS key of the volume API")
	f.StringVar(&o.API.TLS.CACert, "volume-api-tls-ca-cert", o.API.TLS.CACert, "CA certificate that issues the volume API's certificate at start, for this host's names and addresses (without --volume-api-tls-cert)")
	f.StringVar(&o.API.TLS.CAKey, "volume-api-tls-ca-key", o.API.TLS.CAKey, "that CA's key (an agent outside a cluster; in one, --volume-api-tls-request keeps the key with the controller)")
	f.BoolVar(&o.API.TLS.Request, "volume-api-tls-request", o.API.TLS.Request, "ask strata's controller to sign the volume API's certificate for this node (a CertificateSigningRequest for signer "+storagev1alpha1.AgentSigner+"), chaining to --volume-api-tls-ca-cert, which peers trust")
	f.StringVar(&o.API.TenantsFile, "tenants-file", o.API.TenantsFile, "file of tenant:token lines (besides $AGENT_TENANTS)")
	f.StringVar(&o.API.TenantsSecret, "tenants-secret", o.API.TenantsSecret, "namespace/name of a Secret whose keys are tenants and values their tokens")
	f.StringVar(&o.Btrfs.TenantNetworks, "tenant-networks", o.Btrfs.TenantNetworks, "tenant:CIDR pairs, comma-separated: the networks each tenant's NFS clients may be in; a tenant not listed may export to single addresses only")
	f.StringVar(&o.Btrfs.TenantQuotas, "tenant-quotas", o.Btrfs.TenantQuotas, "tenant:field=value pairs, comma-separated: volumes=SIZE (all its volumes), snapshots=SIZE and snapshotCount=N; e.g. team-a:volumes=100Gi,team-a:snapshotCount=20")
	f.StringVar(&o.Btrfs.Exporter, "exporter", o.Btrfs.Exporter, "NFS server the volumes are exported through: ganesha, kernel or none")
	f.StringVar(&o.Btrfs.GaneshaExports, "ganesha-exports", o.Btrfs.GaneshaExports, "file of EXPORT blocks the agent owns; NFS-Ganesha's configuration must %include it")
	f.StringVar(&o.Btrfs.GaneshaPID, "ganesha-pid-file", o.Btrfs.GaneshaPID, "NFS-Ganesha's pid file, signalled to reload the exports")
	f.DurationVar(&o.API.SyncInterval, "export-sync-interval", o.API.SyncInterval, "how often exports are checked against the volumes' records")
	f.StringVar(&o.Images.Dir, "image-dir", o.Images.Dir, "directory of the VM image cache and image jobs' records; empty serves no image jobs (docs/images.md). On a node agent, with --pairs-dir and --image-volume-group, jobs fill logical volumes")
	f.StringVar(&o.LVM.ImageVolumeGroup, "image-volume-group", o.LVM.ImageVolumeGroup, "on a node agent: the volume group image jobs make their logical volumes in")
	f.StringVar(&o.LVM.ImageThinPool, "image-thin-pool", o.LVM.ImageThinPool, "on a node agent: the thin pool of those volumes; empty makes thick ones")
	f.Int64Var(&o.Images.CacheBytes, "image-cache-bytes", o.Images.CacheBytes, "bound of the image cache in bytes; least recently used images not in use go first; 0 is no bound")
	f.IntVar(&o.Images.Concurrency, "image-jobs", provision.DefaultConcurrency, "image jobs that run at once")
	f.StringVar(&o.Images.CredentialsSecret, "image-credentials-secret", o.Images.CredentialsSecret, "namespace/name of a Secret with accessKey and secretKey for the image buckets; empty reads them anonymously")
	f.StringSliceVar(&o.Images.Endpoints, "image-endpoints", nil, "the S3 endpoints (scheme://host[:port]) image URLs may name; an image job naming another is refused before any request. None: image jobs are refused")
	return cmd
}
