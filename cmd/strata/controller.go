package main

import (
	"time"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/cmd/internal/cli"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/strata-gitops/strata/internal/app/manager"
	"github.com/strata-gitops/strata/reconciler/guardwebhook"
)

func controllerCommand() *cobra.Command {
	o := manager.Defaults()
	var kubeconfig string
	var qps float32
	var burst int
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the GitOps controllers (GitRepository, Kustomization, Receiver)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(cli.NewLogger())
			cfg, err := cli.RestConfig(kubeconfig)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = qps, burst
			ctx := ctrl.SetupSignalHandler()
			mgr, err := manager.New(ctx, cfg, o)
			if err != nil {
				return err
			}
			return mgr.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	f.Float32Var(&qps, "kube-api-qps", 50, "requests per second to the API server, sustained")
	f.IntVar(&burst, "kube-api-burst", 300, "requests to the API server in a burst")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus metrics endpoint, 0 to disable")
	f.StringVar(&o.HealthProbeAddr, "health-probe-bind-address", o.HealthProbeAddr, "address of the /healthz and /readyz probes, 0 to disable")
	f.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "address of Go's profiler (/debug/pprof/), for diagnosing CPU and memory; empty serves none")
	f.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader so that only one replica reconciles")
	f.StringVar(&o.ArtifactDir, "artifact-dir", o.ArtifactDir, "directory for git mirrors and artifacts")
	f.StringVar(&o.ArtifactAddr, "artifact-bind-address", o.ArtifactAddr, "address of the artifact file server, 0 to disable")
	f.StringVar(&o.ArtifactAdvAddr, "artifact-adv-address", o.ArtifactAdvAddr, "base URL written into artifact URLs (default: derived from --artifact-bind-address)")
	f.StringVar(&o.ReceiverAddr, "receiver-bind-address", o.ReceiverAddr, "address of the webhook receiver, 0 to disable")
	f.IntVar(&o.Concurrent, "concurrent", o.Concurrent, "Kustomizations and GitRepositories reconciled in parallel")
	f.StringVar(&o.DefaultServiceAccount, "default-service-account", o.DefaultServiceAccount,
		"service account, in each Kustomization's namespace, that Kustomizations without spec.serviceAccountName apply as (multi-tenancy lockdown); empty: the controller's own")
	f.BoolVar(&o.NoCrossNamespaceRefs, "no-cross-namespace-refs", o.NoCrossNamespaceRefs,
		"refuse Kustomizations whose sourceRef or dependsOn names another namespace (multi-tenancy lockdown)")
	f.BoolVar(&o.InsecureKubeconfigTLS, "insecure-kubeconfig-tls", o.InsecureKubeconfigTLS,
		"take insecure-skip-tls-verify from spec.kubeConfig Secrets (the remote API server's certificate is then not checked)")
	f.StringVar(&o.EventsAddr, "events-addr", o.EventsAddr,
		"Flux's notification-controller events endpoint, as Flux's controllers take it: every event is also posted there in Flux's format, for Flux's Alerts")
	f.StringVar(&o.AlertsAddr, "alerts-bind-address", o.AlertsAddr,
		"address of the events endpoint for strata's own Alerts and Providers (Flux's format; agents post here), with the engine; 0 serves none. With no --events-addr, the controller's events go there")
	f.StringSliceVar(&o.AlertHosts, "alert-hosts", o.AlertHosts,
		"hosts Providers may send notifications to: a name, or *.domain for any name under it; a Provider addressing another host is refused (an event on its Alert says so)")
	f.IntVar(&o.GuardWebhook.Port, "guard-webhook-port", 0,
		"in storage-only mode (--engine=false), serve the data-loss guard for Flux's prunes, a validating admission webhook, on this port (HTTPS); 0 serves none")
	f.StringVar(&o.GuardWebhook.CertDir, "guard-webhook-cert-dir", "/etc/strata/guard-webhook",
		"directory holding the guard webhook's tls.crt and tls.key")
	f.StringSliceVar(&o.GuardWebhook.Users, "guard-flux-users", guardwebhook.DefaultUsers,
		"users whose deletes the guard webhook checks: Flux's kustomize-controller's service account")
	f.StringSliceVar(&o.GuardWebhook.GarbageCollectors, "guard-garbage-collectors", guardwebhook.DefaultGarbageCollectors,
		"users the garbage collector deletes as: the guard webhook checks their deletes of what a Kustomization applied (an owner Flux pruned takes it along)")
	f.StringVar(&o.GuardWebhook.DefaultServiceAccount, "guard-flux-default-service-account", "",
		"Flux's kustomize-controller's --default-service-account, if it runs with one: the guard webhook checks that account's deletes of what a Kustomization naming no service account applied")
	f.StringVar(&o.Dashboard.Addr, "dashboard-bind-address", "0",
		"address of the read-only web dashboard (docs/dashboard.md); 0 serves none")
	f.StringVar(&o.Dashboard.Auth, "dashboard-auth", "kubernetes",
		"how the dashboard's callers are authenticated: kubernetes (a bearer token, checked with a TokenReview; each view asks a SubjectAccessReview) or none (whoever reaches the port: only behind kubectl port-forward)")
	f.StringVar(&o.Dashboard.UsageAccount, "volume-usage-account", "",
		"NAMESPACE/NAME of a service account that may get nodes/stats and nothing else: the dashboard reads each claim's used bytes from the kubelets with its tokens; empty reads none")
	f.DurationVar(&o.Dashboard.UsageInterval, "volume-usage-interval", time.Minute,
		"how often the kubelets are asked for the claims' used bytes (they measure once a minute by default)")
	f.BoolVar(&o.Dashboard.VerifyKubelets, "volume-usage-verify-kubelets", false,
		"verify the kubelets' serving certificates against the cluster's CA (kubelets with serverTLSBootstrap); false accepts any, as most clusters' kubelets serve a self-signed one")
	f.BoolVar(&o.Engine, "engine", o.Engine,
		"run the GitOps engine (GitRepository, OCIRepository, Bucket, Kustomization, Receiver); false is storage-only mode beside Flux: strata serves only its own kinds and never touches Flux's objects")
	f.BoolVar(&o.ServeSources, "serve-sources", o.ServeSources,
		"reconcile GitRepository, OCIRepository and Bucket sources; false leaves them to Flux's source-controller, whose artifacts Kustomizations then download (--remote-artifact-hosts)")
	f.StringSliceVar(&o.RemoteArtifactHosts, "remote-artifact-hosts", o.RemoteArtifactHosts,
		"hosts (host or host:port) whose artifacts Kustomizations may download when another controller serves their source, such as Flux's source-controller or an ExternalArtifact's producer")
	f.BoolVar(&o.AllowInsecureHTTPAuth, "insecure-allow-http-auth", o.AllowInsecureHTTPAuth, "let GitRepositories send credentials to plain http:// URLs (they cross the network in clear)")
	f.StringVar(&o.LeaseNamespace, "lease-namespace", o.LeaseNamespace, "namespace of the agents' node Leases, which failover reads")
	f.StringVar(&o.Populator.Image, "populator-image", "", "strata-node's image (or strata's), which the image populator's pods run (strata-node image fill); empty turns the populator off (docs/images.md)")
	f.StringVar(&o.Populator.Namespace, "populator-namespace", "strata-system", "namespace of the image populator's prime claims, pods and credential copies")
	f.StringVar(&o.AgentCA.Secret, "agent-ca-secret", "", "namespace/name of the agents' CA Secret (kubernetes.io/tls): the controller signs the agents' serving certificates (CertificateSigningRequests of signer "+storagev1alpha1.AgentSigner+"), each for its own node, and the key stays here; empty signs none")
	f.StringSliceVar(&o.AgentCA.Agents, "agent-ca-agents", nil, "user names of the agents' service accounts (system:serviceaccount:NAMESPACE:NAME) whose certificate requests --agent-ca-secret signs")
	f.StringSliceVar(&o.Populator.Endpoints, "populator-endpoints", nil, "the S3 endpoints (scheme://host[:port]) VolumeImages may name, as the agents' --image-endpoints; a VolumeImage naming another is refused before anything is made. Empty refuses every one")
	f.StringVar(&o.Populator.CacheDir, "populator-cache-dir", "/var/lib/strata/images/cache", "the nodes' image cache, a host path the populator's pods share")
	f.StringVar(&o.BuildbarnImageRepository, "buildbarn-image-repository", "", "repository of Buildbarn's images (bb-storage, bb-scheduler, bb-worker, bb-runner-installer, bb-browser under it), for components whose spec.image is empty; empty: each must name its image (docs/buildbarn.md)")
	f.IntVar(&o.LVMPairs.Port, "lvm-pairs-port", 8421, "port of the node agents' pair API (their --pairs-listen), which the LVM mover is driven through")
	f.StringVar(&o.LVMPairs.Tokens, "lvm-pairs-tokens-secret", "", "namespace/name of the Secret of the node agents' tenants (one key: the controller's tenant, its token); empty replicates no logical volume")
	f.StringVar(&o.CSISecretsFor, "csi-secrets-for", "", "namespace/name of the CSI controller's service account: it gets read access to exactly the Secrets strata's StorageClasses name (a Role per namespace); empty gives none")
	f.StringVar(&o.LVMPairs.ServiceAccount, "lvm-pairs-service-account", "", "namespace/name of the controller's own service account: it calls each node's agent (started with --pairs-controller) with a token of it for that node's audience alone, strata-agent:<node>, requested from the API server; in place of --lvm-pairs-tokens-secret")
	f.StringVar(&o.LVMPairs.CA, "lvm-pairs-ca-secret", "", "namespace/name of a Secret whose ca.crt the node agents' certificates chain to; empty calls them over plain HTTP")
	f.DurationVar(&o.SelfFenceAfter, "self-fence-after", o.SelfFenceAfter, "how long after a node's last Lease renewal a Failover with fencing AgentSelfFence counts the node fenced: more than the agents' --self-fence-after, their check interval and the clock skew between nodes")
	f.StringVar(&o.WatchLabelSelector, "watch-label-selector", o.WatchLabelSelector, "reconcile only objects matching this label selector (sharding, e.g. sharding.fluxcd.io/key=shard1)")
	return cmd
}
