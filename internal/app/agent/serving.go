package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/httpserver"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// APIOptions are the TLS and tenants the agent's HTTP APIs serve with.
type APIOptions struct {
	// TLS turns TLS on (volumeapi.TLSFiles); its Node is the agent's.
	TLS volumeapi.TLSFiles
	// TenantsEnv is tenant:token pairs, from $AGENT_TENANTS.
	TenantsEnv  string
	TenantsFile string
	// TenantsSecret is namespace/name of a Secret of tenant: token.
	TenantsSecret string
	// SyncInterval is how often exports are checked against the
	// volumes' records, and the tenants read again.
	SyncInterval time.Duration
}

// serving is what every agent API serves with: its TLS, how it calls its
// peers, and its tenants, read again by load.
type serving struct {
	tls      *tls.Config
	peerHTTP *http.Client
	tenants  *volumeapi.Tenants
	byTenant map[string]string
	load     func() (map[string]string, error)
}

// peers is where the agent's syncs may send: over HTTPS when it serves
// HTTPS itself, to the cluster's nodes when it has a Kubernetes API.
func (sv serving) peers(c client.Reader) volumeapi.PeerPolicy {
	p := volumeapi.PeerPolicy{PlainHTTP: sv.tls == nil}
	if c != nil {
		p.Hosts = volumeapi.NodeHosts(c, time.Minute)
	}
	return p
}

// served reads the options' TLS, peer client and tenants; c reads the
// API server directly, and w, when the agent has a Kubernetes API, asks
// strata's controller for its certificate.
func (o Options) served(ctx context.Context, c client.Reader, w client.Client) (serving, error) {
	var sv serving
	var err error
	files := o.API.TLS
	files.Node = o.Node
	if sv.tls, err = files.ServerTLS(ctx, w, c); err != nil {
		return sv, err
	}
	if sv.peerHTTP, err = files.PeerHTTP(); err != nil {
		return sv, err
	}
	secret, err := volumeapi.SecretKey("tenants-secret", o.API.TenantsSecret)
	if err != nil {
		return sv, err
	}
	if secret.Name != "" && c == nil {
		return sv, fmt.Errorf("--tenants-secret needs a Kubernetes API: set --kubeconfig or run in a cluster")
	}
	sv.load = func() (map[string]string, error) {
		return volumeapi.LoadTenants(ctx, o.API.TenantsEnv, o.API.TenantsFile, c, secret)
	}
	sv.tenants = &volumeapi.Tenants{}
	if sv.byTenant, err = sv.load(); err != nil {
		return sv, err
	}
	return sv, sv.tenants.Set(sv.byTenant)
}

// serve serves an API's routes until ctx ends.
func serve(ctx context.Context, listen string, sv serving, server *volumeapi.Server) error {
	return httpserver.Serve(ctx, listen, sv.tls, server.Handler())
}

// warningEventType makes every notice a Warning: what a store did to
// stored data.
func warningEventType(string) string { return corev1.EventTypeWarning }

// imageEventType makes an image job's failure a Warning, its other steps
// Normal.
func imageEventType(reason string) string {
	if reason == "ImageJobFailed" {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// notice logs what a part did, and records it as an event on the node
// when the agent has a recorder.
func (a *Agent) notice(o Options, logger logr.Logger, kind func(reason string) string) func(reason, message string) {
	return func(reason, message string) {
		logger.Info(message, "reason", reason)
		if a.events != nil && o.Node != "" {
			node := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: o.Node}
			a.events.Eventf(node, nil, kind(reason), reason, reason, "%s", message)
		}
	}
}

// reloadTenants reads the tenants again every interval, so that a token
// rotated in the Secret or file takes effect; a bad configuration is
// logged and the last good one kept.
func reloadTenants(ctx context.Context, tenants *volumeapi.Tenants, load func() (map[string]string, error), every time.Duration, logger logr.Logger) {
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
