package volumeapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/storage/agent/volumes"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/nfs"
)

// Options configure the btrfs side of `strata agent`.
type Options struct {
	// Base is the directory on btrfs that holds the volumes; empty
	// serves no btrfs volumes.
	Base   string
	Listen string
	// TLSCert and TLSKey turn TLS on when both are set. Without them,
	// TLSCACert and TLSCAKey turn it on with a certificate the CA issues
	// at start for this host.
	TLSCert, TLSKey     string
	TLSCACert, TLSCAKey string
	// TenantsEnv is tenant:token pairs, from $AGENT_TENANTS.
	TenantsEnv  string
	TenantsFile string
	// TenantsSecret is namespace/name of a Secret of tenant: token.
	TenantsSecret string
	// TenantNetworks is tenant:CIDR pairs: where each tenant's NFS
	// clients may be.
	TenantNetworks string
	// TenantQuotas is tenant:field=value pairs (ParseQuotas).
	TenantQuotas string
	// Exporter is ganesha, kernel or none.
	Exporter       string
	GaneshaExports string
	GaneshaPID     string
	// SyncInterval is how often exports are checked against the volumes'
	// metadata, and tenants read again.
	SyncInterval time.Duration
	Node         string
	// Events, when set, receives a Warning on the Node for each leftover
	// the store moves to quarantine.
	Events events.EventRecorder
	// Opened, when set, is given the store once it is open: the agent's
	// self-fencing acts on it.
	Opened func(*volumes.Store)
	// Images turns image jobs on.
	Images ImageOptions
	// Controller, when set, is the only caller RunPairs's pair routes
	// take (ControllerCaller).
	Controller *ControllerCaller
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Listen: ":8420", Exporter: "ganesha", GaneshaExports: "/etc/ganesha/strata-exports.conf",
		GaneshaPID: "/run/ganesha/ganesha.pid", SyncInterval: time.Minute, Node: os.Getenv("NODE_NAME"),
		TenantsEnv: os.Getenv("AGENT_TENANTS")}
}

// Exporter returns the exporter the options name.
func (o Options) exporter() (nfs.Exporter, error) {
	switch o.Exporter {
	case "ganesha":
		return &nfs.Ganesha{ExportsFile: o.GaneshaExports, PIDFile: o.GaneshaPID}, nil
	case "kernel":
		return nfs.NewKernel(o.Base), nil
	case "none", "":
		return nil, nil
	}
	return nil, fmt.Errorf("--exporter %q: use ganesha, kernel or none", o.Exporter)
}

// Run serves the API until ctx ends. c reads the tenants Secret; it may
// be nil when there is none.
func Run(ctx context.Context, c client.Reader, o Options) error {
	exporter, err := o.exporter()
	if err != nil {
		return err
	}
	store, err := volumes.Open(ctx, o.Base, exporter, o.Node)
	if err != nil {
		return err
	}
	served, err := o.served(ctx, c)
	if err != nil {
		return err
	}
	networks, err := ParseNetworks(o.TenantNetworks)
	if err != nil {
		return fmt.Errorf("--tenant-networks: %w", err)
	}
	quotas, err := ParseQuotas(o.TenantQuotas)
	if err != nil {
		return fmt.Errorf("--tenant-quotas: %w", err)
	}
	logger := log.FromContext(ctx).WithName("volumes")
	store.Notice = o.notice(logger)
	if o.Opened != nil {
		o.Opened(store)
	}
	store.Quotas = quotas
	go store.Run(ctx, o.SyncInterval, slices.Sorted(maps.Keys(served.byTenant)), logger)
	go reloadTenants(ctx, served.tenants, served.load, o.SyncInterval, logger)
	logger.Info("serving the volume API", "listen", o.Listen, "tls", served.tls != nil, "base", store.Base, "exporter", o.Exporter, "tenants", len(served.byTenant))
	server := New(store, served.tenants)
	server.Networks, server.PeerHTTP, server.Peers = networks, served.peerHTTP, served.peers(c)
	if o.Images.Dir != "" {
		if server.Images, err = o.Images.open(ctx, c, provision.BtrfsVolumes{Store: store}, o.imageNotice(logger)); err != nil {
			return err
		}
	}
	return httpserver.Serve(ctx, o.Listen, served.tls, server.Handler())
}

// RunPairs serves the pair and replica routes of a store of pairs alone,
// with the options' listen address, TLS and tenants: the node agent's
// API for the LVM mover. With o.Images.Dir set, it serves image jobs too,
// which fill images (logical volumes).
func RunPairs(ctx context.Context, c client.Reader, o Options, pairs Pairs, images provision.Volumes) error {
	served, err := o.served(ctx, c)
	if err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithName("pairs")
	go reloadTenants(ctx, served.tenants, served.load, o.SyncInterval, logger)
	logger.Info("serving the pair API", "listen", o.Listen, "tls", served.tls != nil, "tenants", len(served.byTenant))
	server := NewPairServer(pairs, served.tenants)
	server.PeerHTTP, server.Peers, server.Controller = served.peerHTTP, served.peers(c), o.Controller
	if o.Images.Dir != "" {
		if server.Images, err = o.Images.open(ctx, c, images, o.imageNotice(logger)); err != nil {
			return err
		}
	}
	return httpserver.Serve(ctx, o.Listen, served.tls, server.Handler())
}

// serving is what every agent API serves with: its TLS, how it calls its
// peers, and its tenants, read again by load.
type serving struct {
	tls      *tls.Config
	peerHTTP *http.Client
	tenants  *Tenants
	byTenant map[string]string
	load     func() (map[string]string, error)
}

// peers is where the agent's syncs may send: over HTTPS when it serves
// HTTPS itself, to the cluster's nodes when it has a Kubernetes API.
func (sv serving) peers(c client.Reader) PeerPolicy {
	p := PeerPolicy{PlainHTTP: sv.tls == nil}
	if c != nil {
		p.Hosts = NodeHosts(c, time.Minute)
	}
	return p
}

// served reads the options' TLS, peer client and tenants.
func (o Options) served(ctx context.Context, c client.Reader) (serving, error) {
	var sv serving
	var err error
	if sv.tls, err = o.serverTLS(); err != nil {
		return sv, err
	}
	if sv.peerHTTP, err = o.peerHTTP(); err != nil {
		return sv, err
	}
	secret, err := SecretKey("tenants-secret", o.TenantsSecret)
	if err != nil {
		return sv, err
	}
	if secret.Name != "" && c == nil {
		return sv, fmt.Errorf("--tenants-secret needs a Kubernetes API: set --kubeconfig or run in a cluster")
	}
	sv.load = func() (map[string]string, error) {
		return LoadTenants(ctx, o.TenantsEnv, o.TenantsFile, c, secret)
	}
	sv.tenants = &Tenants{}
	if sv.byTenant, err = sv.load(); err != nil {
		return sv, err
	}
	return sv, sv.tenants.Set(sv.byTenant)
}

// notice logs what the store did to stored data, and records it as a
// Warning event on the node when there is a recorder.
func (o Options) notice(logger logr.Logger) func(reason, message string) {
	return o.noticeAs(logger, func(string) string { return corev1.EventTypeWarning })
}

// imageNotice logs an image job's steps and records them as events on
// the node: a failure as a Warning.
func (o Options) imageNotice(logger logr.Logger) func(reason, message string) {
	return o.noticeAs(logger, func(reason string) string {
		if reason == "ImageJobFailed" {
			return corev1.EventTypeWarning
		}
		return corev1.EventTypeNormal
	})
}

func (o Options) noticeAs(logger logr.Logger, kind func(reason string) string) func(reason, message string) {
	return func(reason, message string) {
		logger.Info(message, "reason", reason)
		if o.Events != nil && o.Node != "" {
			node := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: o.Node}
			o.Events.Eventf(node, nil, kind(reason), reason, reason, "%s", message)
		}
	}
}

// reloadTenants reads the tenants again every interval, so that a token
// rotated in the Secret or file takes effect; a bad configuration is
// logged and the last good one kept.
func reloadTenants(ctx context.Context, tenants *Tenants, load func() (map[string]string, error), every time.Duration, logger interface {
	Error(error, string, ...any)
}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		byTenant, err := load()
		if err == nil {
			err = tenants.Set(byTenant)
		}
		if err != nil {
			logger.Error(err, "reading the tenants again; keeping the last good ones")
		}
	}
}

// SecretKey reads a flag's namespace/name; empty is the zero key.
func SecretKey(flag, s string) (client.ObjectKey, error) {
	if s == "" {
		return client.ObjectKey{}, nil
	}
	for i := range s {
		if s[i] == '/' && i > 0 && i < len(s)-1 {
			return client.ObjectKey{Namespace: s[:i], Name: s[i+1:]}, nil
		}
	}
	return client.ObjectKey{}, fmt.Errorf("--%s %q: write namespace/name", flag, s)
}
