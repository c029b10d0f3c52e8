// Package manager wires strata's reconcilers, the artifact file server and
// the webhook receiver into one controller-runtime manager. `strata
// controller` and `strata up` both run it.
package manager

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/strata-gitops/strata/internal/fluxevents"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	buildbarnv1alpha1 "github.com/strata-gitops/strata/api/buildbarn/v1alpha1"
	failoverv1alpha1 "github.com/strata-gitops/strata/api/failover/v1alpha1"
	volsyncv1alpha1 "github.com/strata-gitops/strata/api/volsync/v1alpha1"
	buildbarn "github.com/strata-gitops/strata/buildbarn/controller"
	"github.com/strata-gitops/strata/dashboard"
	failovercontroller "github.com/strata-gitops/strata/failover/controller"
	"github.com/strata-gitops/strata/failover/lvmagents"
	"github.com/strata-gitops/strata/failover/replication"
	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/internal/scheme"
	"github.com/strata-gitops/strata/internal/whenused"
	"github.com/strata-gitops/strata/notifications/alerts"
	"github.com/strata-gitops/strata/reconciler/kustomization"
	"github.com/strata-gitops/strata/reconciler/skipapply"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/bucket"
	"github.com/strata-gitops/strata/sources/git"
	"github.com/strata-gitops/strata/sources/oci"
	"github.com/strata-gitops/strata/sources/receiver"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agentcerts"
	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"
	"github.com/strata-gitops/strata/storage/csisecrets"
	"github.com/strata-gitops/strata/storage/imagepopulator"
	"github.com/strata-gitops/strata/storage/lvmcluster"
)

// Options are the controller's flags.
type Options struct {
	MetricsAddr     string
	HealthProbeAddr string
	// PprofAddr serves Go's profiler (/debug/pprof/); empty or 0 serves none.
	PprofAddr          string
	LeaderElect        bool
	ArtifactDir        string
	ArtifactAddr       string
	ArtifactAdvAddr    string
	ReceiverAddr       string
	Concurrent         int
	WatchLabelSelector string
	// DefaultServiceAccount is what Kustomizations without
	// spec.serviceAccountName apply as; NoCrossNamespaceRefs refuses
	// sources and dependencies in other namespaces (Flux's lockdown).
	DefaultServiceAccount string
	NoCrossNamespaceRefs  bool
	// InsecureKubeconfigTLS lets spec.kubeConfig skip the remote
	// server's certificate check.
	InsecureKubeconfigTLS bool
	// Engine runs the GitOps engine (sources, Kustomizations, Receivers);
	// false is storage-only mode: strata serves only its own kinds and
	// never reads or writes Flux's, which Flux reconciles.
	Engine bool
	// ServeSources runs strata's GitRepository, OCIRepository and Bucket
	// reconcilers; false leaves every source to another controller (Flux's
	// source-controller) while strata's engine builds from its artifacts.
	ServeSources bool
	// RemoteArtifactHosts are the hosts whose artifacts Kustomizations may
	// build from when another controller serves their source (Flux's
	// source-controller, ExternalArtifact producers).
	RemoteArtifactHosts []string
	// EventsAddr is Flux's notification-controller's events endpoint
	// (Flux's --events-addr): every event is also posted there in Flux's
	// format. Empty: Kubernetes events only.
	EventsAddr string
	// AlertsAddr serves Flux's events endpoint for strata's own Alerts and
	// Providers (notifications/alerts), with the engine; "0" serves none.
	// With no EventsAddr, the controller's events go there.
	AlertsAddr string
	// AlertHosts are the hosts Providers may send to (--alert-hosts).
	AlertHosts []string
	// GuardWebhook serves the data-loss guard for Flux's prunes in
	// storage-only mode (reconciler/guardwebhook).
	GuardWebhook GuardWebhook
	// Dashboard serves the read-only web dashboard (package dashboard).
	Dashboard Dashboard
	// AllowInsecureHTTPAuth lets GitRepositories send credentials to
	// plain http:// URLs.
	AllowInsecureHTTPAuth bool
	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool
	// LeaseNamespace holds the agents' node Leases; SelfFenceAfter is how
	// long after a node's last renewal a Failover with AgentSelfFence
	// counts it fenced (docs/failover.md).
	LeaseNamespace string
	SelfFenceAfter time.Duration
	// LVMPairs reach the node agents' pair API for the LVM mover; with no
	// Tokens Secret, logical volumes are not replicated.
	LVMPairs LVMPairs
	// Populator fills claims from VolumeImages; with no Image, it is off.
	Populator Populator
	// AgentCA signs the node agents' serving certificates
	// (storage/agentcerts): the CA Secret, namespace/name (empty signs
	// none), and the agents' service account user names.
	AgentCA struct {
		Secret string
		Agents []string
	}
	// CSISecretsFor, namespace/name of the CSI controller's service
	// account, gives it read access to exactly the Secrets strata's
	// StorageClasses name (storage/csisecrets); empty gives none.
	CSISecretsFor string
	// BuildbarnImageRepository is where Buildbarn images a component's
	// spec does not name come from (docs/buildbarn.md).
	BuildbarnImageRepository string
}

// Populator configures the image populator (docs/images.md): the
// namespace of its prime claims and pods, the image its pods run
// (strata's own), and the nodes' image cache directory.
type Populator struct {
	Namespace, Image, CacheDir string
	// Endpoints are the S3 endpoints VolumeImages may name.
	Endpoints []string
}

// Defaults are the flag defaults.
func Defaults() Options {
	return Options{
		MetricsAddr:     ":8080",
		HealthProbeAddr: ":9440",
		ArtifactDir:     "/data",
		ArtifactAddr:    ":9090",
		ReceiverAddr:    ":9292",
		AlertsAddr:      ":9690",
		Concurrent:      10,
		LeaseNamespace:  "strata-system",
		SelfFenceAfter:  failovercontroller.DefaultSelfFenceAfter,
		Engine:          true,
		ServeSources:    true,
		// Where Flux's source-controller advertises its artifacts.
		RemoteArtifactHosts: []string{"source-controller.flux-system.svc.cluster.local."},
	}
}

// recorder records the events of the controller named: Kubernetes
// events, and, with --events-addr, the same posted to Flux's
// notification-controller (internal/fluxevents).
func (o Options) recorder(mgr manager.Manager, name string) events.EventRecorder {
	r, err := fluxevents.New(mgr.GetEventRecorder(name), mgr.GetScheme(), mgr.GetLogger(), o.EventsAddr, name)
	if err != nil { // the address was checked by New
		return mgr.GetEventRecorder(name)
	}
	return r
}

// New builds the manager with every strata controller registered.
func New(ctx context.Context, cfg *rest.Config, o Options) (manager.Manager, error) {
	if o.EventsAddr != "" {
		if u, err := url.Parse(o.EventsAddr); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--events-addr %q is not an http(s) URL, such as http://notification-controller.flux-system.svc.cluster.local./", o.EventsAddr)
		}
	}
	if o.servesAlerts() && o.EventsAddr == "" {
		o.EventsAddr = "http://" + localAddr(o.AlertsAddr) + "/"
	}
	cfg = withoutFinalizerNameWarning(cfg)
	cacheOpts, err := shardCache(o.WatchLabelSelector)
	if err != nil {
		return nil, err
	}
	if o.Engine && o.Dashboard.on() {
		// The GitOps page's events: only the Kustomizations', not every
		// Event of the cluster.
		if cacheOpts.ByObject == nil {
			cacheOpts.ByObject = map[client.Object]cache.ByObject{}
		}
		cacheOpts.ByObject[&corev1.Event{}] = cache.ByObject{Field: dashboard.KustomizationEventsSelector}
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.HealthProbeAddr,
		PprofBindAddress:       o.PprofAddr,
		LeaderElection:         o.LeaderElect,
		LeaderElectionID:       "strata-controller-leader",
		Cache:                  cacheOpts,
		Controller:             controllerConfig(o),
	})
	if err != nil {
		return nil, err
	}
	if err := register(ctx, mgr, cfg, o); err != nil {
		return nil, err
	}
	return mgr, nil
}

// shardCache restricts the watched Flux objects to a label selector, as
// Flux's --watch-label-selector does for sharding.
func shardCache(selector string) (cache.Options, error) {
	if selector == "" {
		return cache.Options{}, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return cache.Options{}, fmt.Errorf("--watch-label-selector %q is invalid: %w", selector, err)
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&sourcev1.GitRepository{}:    {Label: sel},
		&sourcev1.OCIRepository{}:    {Label: sel},
		&sourcev1.Bucket{}:           {Label: sel},
		&kustomizev1.Kustomization{}: {Label: sel},
		&notificationv1.Receiver{}:   {Label: sel},
	}}, nil
}

func register(ctx context.Context, mgr manager.Manager, cfg *rest.Config, o Options) error {
	if o.Engine {
		if err := registerEngine(ctx, mgr, cfg, o); err != nil {
			return err
		}
	} else if err := o.GuardWebhook.register(mgr); err != nil {
		return err
	}
	if err := registerStorage(ctx, mgr, o); err != nil {
		return err
	}
	if err := registerDashboard(mgr, cfg, o); err != nil {
		return err
	}
	if o.HealthProbeAddr != "" && o.HealthProbeAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return err
		}
		return mgr.AddReadyzCheck("ping", healthz.Ping)
	}
	return nil
}

// registerEngine runs the GitOps engine: the sources, the Kustomizations,
// the Receivers, the artifact and webhook servers. Storage-only mode
// (--engine=false) leaves all of them to Flux.
func registerEngine(ctx context.Context, mgr manager.Manager, cfg *rest.Config, o Options) error {
	advAddr := o.ArtifactAdvAddr
	if advAddr == "" {
		advAddr = "http://" + localAddr(o.ArtifactAddr)
	}
	storage, err := artifact.NewStorage(filepath.Join(o.ArtifactDir, "artifacts"), advAddr)
	if err != nil {
		return err
	}
	direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	events := o.recorder(mgr, "strata")
	if err := registerSources(mgr, storage, events, o); err != nil {
		return err
	}
	live, err := skipapply.NewLiveCache(cfg, cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if err := mgr.Add(live); err != nil {
		return err
	}
	ksRec := &kustomization.Reconciler{
		Client: mgr.GetClient(), Direct: direct, Live: live, Config: cfg, Storage: storage, Events: events,
		Remote:                &artifact.Fetcher{Storage: storage, Hosts: o.RemoteArtifactHosts},
		RecordDir:             filepath.Join(o.ArtifactDir, "applied"),
		DefaultServiceAccount: o.DefaultServiceAccount, NoCrossNamespaceRefs: o.NoCrossNamespaceRefs,
		InsecureKubeconfigTLS: o.InsecureKubeconfigTLS,
	}
	if err := ksRec.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.Concurrent}); err != nil {
		return err
	}
	if err := (&receiver.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if o.ArtifactAddr != "" && o.ArtifactAddr != "0" {
		if err := mgr.Add(httpServer(o.ArtifactAddr, storage.Handler())); err != nil {
			return err
		}
	}
	if o.servesAlerts() {
		d := &alerts.Dispatcher{Client: mgr.GetClient(), Direct: direct, Events: mgr.GetEventRecorder("strata-alerts"),
			Hosts: o.AlertHosts, NoCrossNamespaceRefs: o.NoCrossNamespaceRefs, Log: mgr.GetLogger().WithName("alerts")}
		if o.WatchLabelSelector != "" {
			// Checked by shardCache when the manager was made.
			d.Selector, _ = labels.Parse(o.WatchLabelSelector)
		}
		if err := mgr.Add(httpServer(o.AlertsAddr, d)); err != nil {
			return err
		}
	}
	if o.ReceiverAddr != "" && o.ReceiverAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/hook/", &receiver.Handler{Reader: mgr.GetClient(), Writer: direct})
		if err := mgr.Add(httpServer(o.ReceiverAddr, mux)); err != nil {
			return err
		}
	}
	return nil
}

// servesAlerts reports whether strata serves Alerts and Providers: with
// its engine (beside Flux, Flux's notification-controller does), at an
// address.
func (o Options) servesAlerts() bool {
	return o.Engine && o.AlertsAddr != "" && o.AlertsAddr != "0"
}

// registerSources registers the reconcilers of the source kinds strata
// serves: GitRepository, OCIRepository and Bucket.
func registerSources(mgr manager.Manager, storage *artifact.Storage, events events.EventRecorder, o Options) error {
	if !o.ServeSources {
		return nil
	}
	gitRec := &git.Reconciler{Client: mgr.GetClient(), Storage: storage, Events: events, MirrorDir: filepath.Join(o.ArtifactDir, "mirrors"),
		AllowInsecureHTTPAuth: o.AllowInsecureHTTPAuth}
	if err := gitRec.SetupWithManager(mgr, o.Concurrent); err != nil {
		return err
	}
	ociRec := &oci.Reconciler{Client: mgr.GetClient(), Storage: storage, Events: events}
	if err := ociRec.SetupWithManager(mgr, o.Concurrent); err != nil {
		return err
	}
	bucketRec := &bucket.Reconciler{Client: mgr.GetClient(), Storage: storage, Events: events}
	if err := bucketRec.SetupWithManager(mgr, o.Concurrent); err != nil {
		return err
	}
	return nil
}

func controllerConfig(o Options) config.Controller {
	return config.Controller{SkipNameValidation: &o.SkipNameValidation}
}

// httpServer runs an HTTP server for as long as the manager runs.
func httpServer(addr string, h http.Handler) manager.RunnableFunc {
	return func(ctx context.Context) error { return httpserver.Serve(ctx, addr, nil, h) }
}

// localAddr turns a bind address like ":9090" into one clients can reach.
func localAddr(bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return net.JoinHostPort("localhost", port)
	}
	return bind
}

// LVMPairs say how the controller reaches the node agents' pair API
// (lvmagents.Agents): the port, the Secret of the agents' tenants (the
// controller's tenant and token), and the Secret of the CA their
// certificates chain to, each namespace/name.
type LVMPairs struct {
	Port       int
	Tokens, CA string
	// ServiceAccount, namespace/name, when set, is the controller's own
	// service account, whose tokens for each node's audience it calls the
	// agents with (lvmagents.Agents.ServiceAccount), in place of Tokens.
	ServiceAccount string
}

// agents resolves volume handles to their agents: logical volumes to the
// node agents' pair API when it is configured, the rest to btrfs hosts.
func (p LVMPairs) agents(mgr manager.Manager, btrfs mover.Agents) (mover.Agents, error) {
	if p.Tokens == "" && p.ServiceAccount == "" {
		return btrfs, nil
	}
	tokens, err := volumeapi.SecretKey("lvm-pairs-tokens-secret", p.Tokens)
	if err != nil {
		return nil, err
	}
	account, err := volumeapi.SecretKey("lvm-pairs-service-account", p.ServiceAccount)
	if err != nil {
		return nil, err
	}
	ca, err := volumeapi.SecretKey("lvm-pairs-ca-secret", p.CA)
	if err != nil {
		return nil, err
	}
	return &lvmagents.Agents{Client: mgr.GetClient(), Port: p.Port, ServiceAccount: account, Minter: mgr.GetClient(), Tokens: tokens, CA: ca,
		Timeout: 30 * time.Second, Others: btrfs}, nil
}

// registerStorage runs the storage controllers: LVMClusters, replication
// and failover, and the image populator.
func registerStorage(ctx context.Context, mgr manager.Manager, o Options) error {
	if err := (&lvmcluster.Reconciler{Client: mgr.GetClient(), Events: o.recorder(mgr, "strata")}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := registerFailover(ctx, mgr, o); err != nil {
		return err
	}
	if o.CSISecretsFor != "" {
		account, err := volumeapi.SecretKey("csi-secrets-for", o.CSISecretsFor)
		if err != nil {
			return err
		}
		if err := (&csisecrets.Reconciler{Client: mgr.GetClient(), Account: account, Name: account.Name + "-secrets",
			Events: o.recorder(mgr, "strata")}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if o.AgentCA.Secret != "" {
		ca, err := volumeapi.SecretKey("agent-ca-secret", o.AgentCA.Secret)
		if err != nil {
			return err
		}
		if err := (&agentcerts.Signer{Client: mgr.GetClient(), CA: ca, Agents: o.AgentCA.Agents}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := registerBuildbarn(ctx, mgr, o); err != nil {
		return err
	}
	return o.Populator.register(mgr, o)
}

// registerBuildbarn runs the Buildbarn controllers where the cluster
// serves their kinds (the chart's CRDs), from the first component on.
func registerBuildbarn(ctx context.Context, mgr manager.Manager, o Options) error {
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: buildbarnv1alpha1.GroupVersion.Group, Kind: "BuildbarnStorage"}); err != nil {
		log.FromContext(ctx).Info("the Buildbarn kinds are not served: Buildbarn is off", "reason", err.Error())
		return nil
	}
	return buildbarn.SetupWhenUsed(mgr, o.recorder(mgr, "strata-buildbarn"), o.BuildbarnImageRepository)
}

// register runs the image populator, when it has an image to run.
func (p Populator) register(mgr manager.Manager, o Options) error {
	if p.Image == "" {
		return nil
	}
	return (&imagepopulator.Reconciler{Client: mgr.GetClient(), Namespace: p.Namespace, Image: p.Image, CacheDir: p.CacheDir, Endpoints: p.Endpoints,
		Events: o.recorder(mgr, "strata-populator"), Retry: 30 * time.Second}).SetupWithManager(mgr)
}

// registerFailover runs strata's VolSync mover and the Failover
// controller where the cluster serves VolSync's kinds (the chart's CRDs,
// or VolSync's own); without them there is nothing to reconcile, and the
// rest of strata still runs.
func registerFailover(ctx context.Context, mgr manager.Manager, o Options) error {
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: volsyncv1alpha1.GroupVersion.Group, Kind: "ReplicationSource"}); err != nil {
		log.FromContext(ctx).Info("VolSync's kinds are not served: replication (strata.dev/btrfs, strata.dev/lvm) and failover are off", "reason", err.Error())
		return nil
	}
	agents, err := o.LVMPairs.agents(mgr, btrfsbackend.New(mgr.GetClient(), mgr.GetAPIReader(), 30*time.Second))
	if err != nil {
		return err
	}
	// Their watches take in every Deployment, StatefulSet and Secret of
	// the cluster: they start with the first replication or Failover.
	used := []client.Object{&volsyncv1alpha1.ReplicationSource{}, &volsyncv1alpha1.ReplicationDestination{}, &failoverv1alpha1.Failover{}}
	return whenused.Setup(mgr, "replication or failover", used, func() error {
		if err := (&replication.DestinationReconciler{Client: mgr.GetClient(), Agents: agents, Refresh: 30 * time.Second}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&replication.SourceReconciler{Client: mgr.GetClient(), Agents: agents, Continuous: 10 * time.Second,
			SyncTimeout: time.Hour, Now: time.Now}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&failovercontroller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Agents: agents, LeaseNamespace: o.LeaseNamespace,
			SelfFenceAfter: o.SelfFenceAfter, Events: o.recorder(mgr, "strata-failover"), Now: time.Now}).SetupWithManager(mgr)
	})
}
