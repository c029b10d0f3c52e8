package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/strata-gitops/strata/storage/images/provision"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-gitops/strata/failover/lease"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/storage/agent"
	"github.com/strata-gitops/strata/storage/agent/lvmpairs"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumes"
)

func agentCommand() *cobra.Command {
	o := agent.Defaults()
	vo := volumeapi.DefaultOptions()
	var kubeconfig string
	lvmSide := true
	pairsListen := ":8421"
	leasePeriod := 2 * time.Second
	selfFenceAfter := 6 * time.Second
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node's storage agent: volume groups and logical volumes (LVM), and the btrfs volume API with NFS exports",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(newLogger())
			ctx := ctrl.SetupSignalHandler()
			if vo.Node == "" {
				vo.Node = o.NodeName
			}
			if !lvmSide {
				return runVolumeAPIAlone(ctx, kubeconfig, vo, lease.Heartbeat{Namespace: o.Namespace, Node: vo.Node, Period: leasePeriod}, selfFenceAfter)
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			var fencers []fencer
			if vo.Base != "" {
				fencers = append(fencers, btrfsFencer(&vo))
			}
			if o.PairsDir != "" && vo.Base != "" && vo.Images.Dir != "" {
				return fmt.Errorf("--image-dir with both --btrfs-base and --pairs-dir: image jobs fill one kind of volume; run the btrfs volume API in its own agent (--lvm=false)")
			}
			if o.PairsDir != "" {
				o.PairsAPI = vo
				o.PairsAPI.Listen = pairsListen
				fencers = append(fencers, lvmFencer(&o))
			}
			mgr, err := agent.NewManager(ctx, cfg, o)
			if err != nil {
				return err
			}
			beat := &lease.Heartbeat{Client: mgr.GetClient(), Namespace: o.Namespace, Node: o.NodeName, Period: leasePeriod}
			if len(fencers) > 0 && selfFenceAfter > 0 {
				fence := selfFence(selfFenceAfter, fencers...)
				beat.Renewed, beat.SelfFenceAfter = fence.Renewed, selfFenceAfter
				if err := mgr.Add(fence); err != nil {
					return err
				}
			}
			if err := mgr.Add(beat); err != nil {
				return err
			}
			if vo.Base != "" {
				vo.Events = mgr.GetEventRecorder("strata-agent")
				err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return volumeapi.Run(ctx, mgr.GetAPIReader(), vo) }))
				if err != nil {
					return err
				}
			}
			return mgr.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	f.StringVar(&o.NodeName, "node-name", o.NodeName, "this node's name (default: $NODE_NAME)")
	f.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the LVMClusters and of this node's LVMVolumeGroupNodeStatus")
	f.StringVar(&o.Backend, "backend", o.Backend, "volume manager: lvm2, or loopback (logical volumes as loop-device files, for development machines whose kernel lacks device-mapper; only when named)")
	f.StringVar(&o.LoopbackDir, "loopback-dir", o.LoopbackDir, "where the loopback backend keeps volume files")
	f.Uint64Var(&o.MinDeviceSize, "min-device-size", o.MinDeviceSize, "smallest device, in bytes, a device class uses")
	f.StringVar(&o.DiscoverLoopDir, "discover-loop-devices-under", o.DiscoverLoopDir,
		"for development machines: loop devices whose backing file is under this directory count as disks for device classes without paths")
	f.Float64Var(&o.FullThreshold, "thin-pool-full-percent", o.FullThreshold, "data or metadata use of a thin pool, in percent, above which it takes no new volume")
	f.StringVar(&o.APISocket, "api-socket", o.APISocket, "unix socket of the local API the CSI node service uses; empty to serve none")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus metrics endpoint, 0 to disable")
	f.StringVar(&o.HealthProbeAddr, "health-probe-bind-address", o.HealthProbeAddr, "address of the /healthz and /readyz probes, 0 to disable")
	f.DurationVar(&leasePeriod, "lease-period", leasePeriod, "how often the node's Lease strata-node-{node} is renewed; failover reads its age (docs/failover.md)")
	f.DurationVar(&selfFenceAfter, "self-fence-after", selfFenceAfter, "with --btrfs-base or --pairs-dir: fence the replicated volumes (read-only, their writers killed) once the Lease has gone this long past its last RenewTime; published on the Lease, so that the controller promotes under AgentSelfFence only when its --self-fence-after covers this, a tenth of it and 500 ms. 0 never fences, and Failovers with AgentSelfFence on this node then wait for a person (docs/failover.md)")
	f.StringVar(&o.PairsDir, "pairs-dir", o.PairsDir, "directory of the LVM mover's pair records; empty replicates no LVM volume (docs/failover.md)")
	f.StringVar(&pairsListen, "pairs-listen", pairsListen, "with --pairs-dir: address of the LVM mover's pair API, with the volume API's TLS and tenants flags")
	f.StringVar(&o.PairsController, "pairs-controller", "", "with --pairs-dir: the controller's service account user name (system:serviceaccount:NAMESPACE:NAME); the pair routes then take only its token for audience strata-agent, reviewed by the API server, and no tenant token")
	f.StringVar(&o.PairsTenant, "pairs-tenant", "strata", "with --pairs-controller: the tenant the controller's pair calls act as")
	f.BoolVar(&lvmSide, "lvm", lvmSide, "reconcile LVMClusters and LogicalVolumes for this node; false on a host that serves only btrfs volumes")
	f.StringVar(&vo.Base, "btrfs-base", vo.Base, "directory on btrfs that holds the tenants' volumes; empty serves no btrfs volume API")
	f.StringVar(&vo.Listen, "volume-api-listen", vo.Listen, "address of the btrfs volume HTTP API")
	f.StringVar(&vo.TLSCert, "volume-api-tls-cert", vo.TLSCert, "TLS certificate of the volume API (with --volume-api-tls-key)")
	f.StringVar(&vo.TLSKey, "volume-api-tls-key", vo.TLSKey, "TLS key of the volume API")
	f.StringVar(&vo.TLSCACert, "volume-api-tls-ca-cert", vo.TLSCACert, "CA certificate that issues the volume API's certificate at start, for this host's names and addresses (without --volume-api-tls-cert)")
	f.StringVar(&vo.TLSCAKey, "volume-api-tls-ca-key", vo.TLSCAKey, "that CA's key")
	f.StringVar(&vo.TenantsFile, "tenants-file", vo.TenantsFile, "file of tenant:token lines (besides $AGENT_TENANTS)")
	f.StringVar(&vo.TenantsSecret, "tenants-secret", vo.TenantsSecret, "namespace/name of a Secret whose keys are tenants and values their tokens")
	f.StringVar(&vo.TenantNetworks, "tenant-networks", vo.TenantNetworks, "tenant:CIDR pairs, comma-separated: the networks each tenant's NFS clients may be in; a tenant not listed may export to single addresses only")
	f.StringVar(&vo.TenantQuotas, "tenant-quotas", vo.TenantQuotas, "tenant:field=value pairs, comma-separated: volumes=SIZE (all its volumes), snapshots=SIZE and snapshotCount=N; e.g. team-a:volumes=100Gi,team-a:snapshotCount=20")
	f.StringVar(&vo.Exporter, "exporter", vo.Exporter, "NFS server the volumes are exported through: ganesha, kernel or none")
	f.StringVar(&vo.GaneshaExports, "ganesha-exports", vo.GaneshaExports, "file of EXPORT blocks the agent owns; NFS-Ganesha's configuration must %include it")
	f.StringVar(&vo.GaneshaPID, "ganesha-pid-file", vo.GaneshaPID, "NFS-Ganesha's pid file, signalled to reload the exports")
	f.DurationVar(&vo.SyncInterval, "export-sync-interval", vo.SyncInterval, "how often exports are checked against the volumes' records")
	f.StringVar(&vo.Images.Dir, "image-dir", vo.Images.Dir, "directory of the VM image cache and image jobs' records; empty serves no image jobs (docs/images.md). On a node agent, with --pairs-dir and --image-volume-group, jobs fill logical volumes")
	f.StringVar(&o.ImageVolumeGroup, "image-volume-group", o.ImageVolumeGroup, "on a node agent: the volume group image jobs make their logical volumes in")
	f.StringVar(&o.ImageThinPool, "image-thin-pool", o.ImageThinPool, "on a node agent: the thin pool of those volumes; empty makes thick ones")
	f.Int64Var(&vo.Images.CacheBytes, "image-cache-bytes", vo.Images.CacheBytes, "bound of the image cache in bytes; least recently used images not in use go first; 0 is no bound")
	f.IntVar(&vo.Images.Concurrency, "image-jobs", provision.DefaultConcurrency, "image jobs that run at once")
	f.StringVar(&vo.Images.CredentialsSecret, "image-credentials-secret", vo.Images.CredentialsSecret, "namespace/name of a Secret with accessKey and secretKey for the image buckets; empty reads them anonymously")
	f.StringSliceVar(&vo.Images.Endpoints, "image-endpoints", nil, "the S3 endpoints (scheme://host[:port]) image URLs may name; an image job naming another is refused before any request. None: image jobs are refused")
	return cmd
}

// runVolumeAPIAlone serves the btrfs volume API without the LVM side. A
// Kubernetes API is used when one is configured: for --tenants-secret,
// and for the node's Lease and self-fencing, which the volumes this host
// replicates need (docs/failover.md).
func runVolumeAPIAlone(ctx context.Context, kubeconfig string, vo volumeapi.Options, beat lease.Heartbeat, selfFenceAfter time.Duration) error {
	if vo.Base == "" {
		return fmt.Errorf("--lvm=false leaves nothing to do without --btrfs-base")
	}
	var c client.Client
	cfg, err := restConfig(kubeconfig)
	if err == nil {
		c, err = client.New(cfg, client.Options{Scheme: scheme.New()})
	}
	switch {
	case err != nil && vo.TenantsSecret != "":
		return err
	case err != nil:
		log.FromContext(ctx).Info("no Kubernetes API: no node Lease and no self-fencing", "reason", err.Error())
		return volumeapi.Run(ctx, nil, vo)
	}
	beat.Client = c
	if selfFenceAfter > 0 {
		fence := selfFence(selfFenceAfter, btrfsFencer(&vo))
		beat.Renewed, beat.SelfFenceAfter = fence.Renewed, selfFenceAfter
		go func() { _ = fence.Start(ctx) }()
	}
	go func() { _ = beat.Start(ctx) }()
	return volumeapi.Run(ctx, c, vo)
}

// fencer stops the writes to one store's replicated volumes and names
// them.
type fencer func(ctx context.Context) ([]string, error)

// fences is a store of pairs that can fence them all.
type fences interface {
	FencePairs(ctx context.Context) ([]string, error)
}

// fencerOf fences the store opened is given, once it has been: the btrfs
// store the volume API opens, or the LVM mover's the agent makes.
func fencerOf[S any, P interface {
	*S
	fences
}](opened *func(P)) fencer {
	var store atomic.Pointer[S]
	*opened = func(s P) { store.Store((*S)(s)) }
	return func(ctx context.Context) ([]string, error) {
		if s := store.Load(); s != nil {
			return P(s).FencePairs(ctx)
		}
		return nil, nil
	}
}

// btrfsFencer fences the btrfs store the volume API opens.
func btrfsFencer(vo *volumeapi.Options) fencer { return fencerOf[volumes.Store](&vo.Opened) }

// lvmFencer fences the LVM mover's volumes.
func lvmFencer(o *agent.Options) fencer { return fencerOf[lvmpairs.Store](&o.PairsOpened) }

// selfFence fences the stores' replicated volumes once the node's Lease
// goes unrenewed for after.
func selfFence(after time.Duration, fencers ...fencer) *lease.SelfFence {
	return &lease.SelfFence{After: after, Fence: func(ctx context.Context) error {
		var errs []error
		for _, fence := range fencers {
			fenced, err := fence(ctx)
			log.FromContext(ctx).Info("fenced the replicated volumes", "volumes", fenced)
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}}
}
