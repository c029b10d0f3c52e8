package kustomization

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxRemoteClients bounds the remote clusters' clients kept; past it the
// cache starts over (a kubeconfig rotated often must not grow it).
const maxRemoteClients = 64

// remoteClients keeps one client per remote kubeconfig, so that each
// reconcile reuses its connections and the REST mapping it discovered,
// rather than making them again.
type remoteClients struct {
	mu    sync.Mutex
	byKey map[string]remoteClient
}

// remoteClient is a remote cluster's client and its discovery client.
type remoteClient struct {
	client    client.Client
	discovery discovery.DiscoveryInterface
}

// get returns the client of the kubeconfig whose digest is key, made
// from cfg the first time.
func (rc *remoteClients) get(key string, cfg *rest.Config, scheme *runtime.Scheme) (remoteClient, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if c, ok := rc.byKey[key]; ok {
		return c, nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return remoteClient{}, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return remoteClient{}, err
	}
	if rc.byKey == nil || len(rc.byKey) >= maxRemoteClients {
		rc.byKey = map[string]remoteClient{}
	}
	rc.byKey[key] = remoteClient{client: c, discovery: dc}
	return rc.byKey[key], nil
}
