package volumeapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PeerPolicy says where a sync may send a replica. The peer's URL comes
// from a tenant, so without it an agent would call any address a tenant
// names, from the host network: a peer must be reached over HTTPS (the
// agents' CA then proves it is an agent) at an address of one of the
// cluster's nodes.
type PeerPolicy struct {
	// PlainHTTP lets a peer be reached over http://: only an agent that
	// itself serves plain HTTP, in development, sets it.
	PlainHTTP bool
	// Hosts are the host names and addresses agents are reached at;
	// nil allows any host, for a storage host without a Kubernetes API,
	// where only the agents' CA bounds the peers.
	Hosts func(ctx context.Context) (map[string]bool, error)
}

// Check refuses a peer URL that is not an agent's base URL on an allowed
// host.
func (p PeerPolicy) Check(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("peer %q: %v", raw, err)
	}
	switch {
	case !p.allowsScheme(u.Scheme):
		return fmt.Errorf("peer %q: give the peer agent's https:// URL", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return fmt.Errorf("peer %q: give only the peer agent's scheme, host and port", raw)
	case u.Hostname() == "":
		return fmt.Errorf("peer %q names no host", raw)
	}
	if p.Hosts == nil {
		return nil
	}
	hosts, err := p.Hosts(ctx)
	if err != nil {
		return fmt.Errorf("reading the cluster's node addresses to check peer %q: %w", raw, err)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	if !hosts[host] {
		return fmt.Errorf("peer %q: %s is not the name or an address of a node of this cluster; a pair's peer is another node's agent", raw, u.Hostname())
	}
	return nil
}

func (p PeerPolicy) allowsScheme(scheme string) bool {
	return scheme == "https" || (p.PlainHTTP && scheme == "http")
}

// NodeHosts lists the names and addresses of the cluster's nodes, read
// at most every interval: a sync checks its peer against them.
func NodeHosts(c client.Reader, every time.Duration) func(ctx context.Context) (map[string]bool, error) {
	var (
		mu    sync.Mutex
		hosts map[string]bool
		read  time.Time
	)
	return func(ctx context.Context) (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if hosts != nil && time.Since(read) < every {
			return hosts, nil
		}
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return nil, err
		}
		fresh := map[string]bool{}
		for _, n := range nodes.Items {
			fresh[n.Name] = true
			for _, a := range n.Status.Addresses {
				if ip := net.ParseIP(a.Address); ip != nil {
					fresh[ip.String()] = true
				}
				fresh[a.Address] = true
			}
		}
		hosts, read = fresh, time.Now()
		return hosts, nil
	}
}

// Streams are long: a replica sent or received holds its request for as
// long as its data takes. They get a budget of their own, below the
// server's bound on requests, so that syncs held open, by a slow peer or
// on purpose, cannot take the requests the volume API needs; and a
// stream that moves no byte for streamIdle is cut.
// Each tenant holds at most MaxStreamsPerTenant of them, so that one
// tenant's slow or held syncs leave the others theirs.
const (
	MaxStreams          = 16
	MaxStreamsPerTenant = 4
	streamIdle          = 2 * time.Minute
	// peerCallTimeout bounds a call to a peer that moves no stream.
	peerCallTimeout = 30 * time.Second
)

// errBusyStreams answers a stream over the budget, 503 with Retry-After.
var errBusyStreams = errors.New("the agent is moving as many replicas as it may at once; retry")

// streamBudget hands out the stream slots: MaxStreams in all, and
// MaxStreamsPerTenant to each tenant.
type streamBudget struct {
	mu       sync.Mutex
	total    int
	byTenant map[string]int
}

// take returns a release function, or false when every slot, or every
// one of the tenant's share, is held.
func (b *streamBudget) take(tenant string) (func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total >= MaxStreams || b.byTenant[tenant] >= MaxStreamsPerTenant {
		return nil, false
	}
	if b.byTenant == nil {
		b.byTenant = map[string]int{}
	}
	b.total++
	b.byTenant[tenant]++
	return sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.total--
		if b.byTenant[tenant]--; b.byTenant[tenant] == 0 {
			delete(b.byTenant, tenant)
		}
	}), true
}

// idleWatch calls onIdle once when touch has not been called for idle.
type idleWatch struct {
	timer *time.Timer
	idle  time.Duration
}

func watchIdle(idle time.Duration, onIdle func()) *idleWatch {
	return &idleWatch{timer: time.AfterFunc(idle, onIdle), idle: idle}
}

func (w *idleWatch) touch() {
	if w != nil {
		w.timer.Reset(w.idle)
	}
}

func (w *idleWatch) stop() { w.timer.Stop() }
