// Package fakeagent runs nodes' agents on the in-memory backend
// (memstore, which passes the storage contract's suite) behind the real
// node API, for the replication and failover state machines' fast tests:
// no root and no btrfs, and each agent can go down as a lost node's does.
package fakeagent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/testing/memstore"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/rules"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// Tenant and Token are every fake agent's one tenant.
const (
	Tenant = "homelab"
	Token  = "homelab-token-0123456789abcdef"
)

// Node is one node's agent: its in-memory backend served by the node
// API's pair routes over plain HTTP.
type Node struct {
	Name  string
	Store *memstore.Store
	URL   string
	down  atomic.Bool
}

// Start starts the agent of node name until the test ends.
func Start(t testing.TB, name string) *Node {
	t.Helper()
	n := &Node{Name: name, Store: memstore.New()}
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{Tenant: Token}); err != nil {
		t.Fatal(err)
	}
	server := volumeapi.NewPairServer(n.Store, tenants)
	server.Peers = volumeapi.PeerPolicy{PlainHTTP: true}
	handler := server.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.down.Load() {
			n.hangUp(w)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	n.URL = srv.URL
	return n
}

// hangUp drops the connection, as a node that went down does.
func (n *Node) hangUp(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// SetDown makes the agent unreachable, or reachable again.
func (n *Node) SetDown(down bool) { n.down.Store(down) }

// Client is a client of the agent's node API as the controller's.
func (n *Node) Client() *volumeapi.Client { return &volumeapi.Client{URL: n.URL, Token: Token} }

// Claim makes a volume on the agent holding data and, in ns, a claim
// bound to it through a PV with node affinity to the node, as the CSI
// driver and the PV controller would.
func (n *Node) Claim(t testing.TB, c client.Client, ns, name string, data []byte) {
	t.Helper()
	if err := n.Store.Write(Tenant, name, data); err != nil {
		t.Fatal(err)
	}
	testenv.BindClaim(t, c, testenv.Claim{Namespace: ns, Name: name, Node: n.Name, Class: "fake", Handle: n.Name + "|" + name,
		Attributes: rules.BtrfsVolumeContext(), Size: resource.MustParse("128Mi")})
}

// Agents finds the fake agents by their volumes' handles, node|volume,
// as the movers find real ones; each call may be made to fail once
// after it acted (FailOnceAfter), as an agent whose answer a crash or a
// cut network lost.
type Agents struct {
	mu    sync.Mutex
	nodes map[string]*Node
	// failed are the calls that already failed once.
	failOnce bool
	failed   map[string]bool
}

// NewAgents finds the given nodes' agents.
func NewAgents(nodes ...*Node) *Agents {
	a := &Agents{nodes: map[string]*Node{}, failed: map[string]bool{}}
	for _, n := range nodes {
		a.nodes[n.Name] = n
	}
	return a
}

// FailOnceAfter makes every kind of call on every agent fail the first
// time, after the agent did what it was asked: the controller never
// hears that the step was taken, and must take it again.
func (a *Agents) FailOnceAfter() { a.failOnce = true }

// AgentOf implements mover.Agents.
func (a *Agents) AgentOf(_ context.Context, handle string) (mover.Agent, string, error) {
	node, volume, ok := strings.Cut(handle, "|")
	n := a.nodes[node]
	if !ok || n == nil {
		return nil, "", fmt.Errorf("volume handle %q names no fake agent", handle)
	}
	if !a.failOnce {
		return n.Client(), volume, nil
	}
	return &lossy{Agent: n.Client(), once: a.once}, volume, nil
}

// once says whether call fails now: only the first time.
func (a *Agents) once(call string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed[call] {
		return false
	}
	a.failed[call] = true
	return true
}

// lossy is an agent whose every kind of call loses its first answer.
type lossy struct {
	mover.Agent
	once func(call string) bool
}

func lose[T any](l *lossy, call string, v T, err error) (T, error) {
	if err == nil && l.once(l.Address()+" "+call) {
		var zero T
		return zero, fmt.Errorf("%s on %s: the answer was lost (test)", call, l.Address())
	}
	return v, err
}

func (l *lossy) SetPair(ctx context.Context, name string, req wire.PairRequest) (wire.Pair, error) {
	v, err := l.Agent.SetPair(ctx, name, req)
	return lose(l, "SetPair", v, err)
}

func (l *lossy) Sync(ctx context.Context, name string, req wire.SyncRequest) (wire.Replica, error) {
	v, err := l.Agent.Sync(ctx, name, req)
	return lose(l, "Sync", v, err)
}

func (l *lossy) Promote(ctx context.Context, name string) (wire.Volume, error) {
	v, err := l.Agent.Promote(ctx, name)
	return lose(l, "Promote", v, err)
}

func (l *lossy) Fence(ctx context.Context, name string) (wire.Pair, error) {
	v, err := l.Agent.Fence(ctx, name)
	return lose(l, "Fence", v, err)
}

func (l *lossy) Unfence(ctx context.Context, name string) (wire.Volume, error) {
	v, err := l.Agent.Unfence(ctx, name)
	return lose(l, "Unfence", v, err)
}
