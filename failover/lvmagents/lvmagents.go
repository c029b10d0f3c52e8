// Package lvmagents finds, for the LVM mover, the node agent that holds a
// logical volume: replication and failover reach it by the volume's CSI
// handle, as they reach a btrfs volume's agent (docs/failover.md).
package lvmagents

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/csi/backend"
)

// Others resolve the handles of volumes that are not logical volumes.
type Others interface {
	AgentOf(ctx context.Context, volumeHandle string) (mover.Agent, string, error)
}

// Agents resolves a logical volume's handle to its node agent's pair API
// (the agent's --pairs-listen port on the node's InternalIP) and the
// volume's name there, <group>/<volume>. A handle that names no
// LogicalVolume goes to Others.
type Agents struct {
	Client client.Reader
	// Port is the agents' pair API port.
	Port int
	// ServiceAccount, when set, is the controller's own service account:
	// each call to a node's agent carries a token of it for that node's
	// audience alone (volumeapi.AudienceFor), requested from the API
	// server through Minter and reviewed by the agent. No node holds a
	// token another node's agent takes.
	ServiceAccount client.ObjectKey
	Minter         client.Client
	// Tokens, without ServiceAccount, is the Secret of the agents'
	// tenants: its one key is the tenant, and its value the token.
	Tokens client.ObjectKey
	// CA is the Secret whose ca.crt the agents' certificates chain to;
	// empty calls them over plain HTTP.
	CA client.ObjectKey
	// Timeout bounds one call.
	Timeout time.Duration
	Others  Others

	clients sync.Map // CA PEM → *http.Client
	minted  tokenCache
}

// AgentOf implements mover.Agents.
func (a *Agents) AgentOf(ctx context.Context, volumeHandle string) (mover.Agent, string, error) {
	id, err := backend.ParseVolumeID(volumeHandle)
	if err != nil {
		return nil, "", err
	}
	lv := &storagev1alpha1.LogicalVolume{}
	err = a.Client.Get(ctx, client.ObjectKey{Name: id.Name}, lv)
	if apierrors.IsNotFound(err) && a.Others != nil {
		return a.Others.AgentOf(ctx, volumeHandle)
	}
	if err != nil {
		return nil, "", fmt.Errorf("LogicalVolume %s: %w", id.Name, err)
	}
	address, err := a.nodeAddress(ctx, lv.Spec.NodeName)
	if err != nil {
		return nil, "", err
	}
	c, err := a.client(ctx, lv.Spec.NodeName, address)
	if err != nil {
		return nil, "", err
	}
	return c, lv.Spec.DeviceClass + "/" + lv.Spec.Name, nil
}

// nodeAddress is the node's InternalIP, where its agent listens on the
// host network.
func (a *Agents) nodeAddress(ctx context.Context, node string) (string, error) {
	n := &corev1.Node{}
	if err := a.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	for _, addr := range n.Status.Addresses {
		if addr.Type == corev1.NodeInternalIP {
			return addr.Address, nil
		}
	}
	return "", fmt.Errorf("node %s reports no InternalIP: its agent's pair API cannot be reached", node)
}

// client is a client of node's agent at address, with the token.
func (a *Agents) client(ctx context.Context, node, address string) (*volumeapi.Client, error) {
	token, err := a.token(ctx, node)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	httpClient, err := a.httpClient(ctx)
	if err != nil {
		return nil, err
	}
	if a.CA.Name != "" {
		scheme = "https"
	}
	u := scheme + "://" + net.JoinHostPort(address, strconv.Itoa(a.Port))
	return &volumeapi.Client{URL: u, Token: token, HTTP: httpClient}, nil
}

// token is what the controller calls node's agent with.
func (a *Agents) token(ctx context.Context, node string) (string, error) {
	if a.ServiceAccount.Name != "" {
		return a.minted.get(ctx, a.Minter, a.ServiceAccount, volumeapi.AudienceFor(node))
	}
	tenants := &corev1.Secret{}
	if err := a.Client.Get(ctx, a.Tokens, tenants); err != nil {
		return "", fmt.Errorf("the agents' tenants Secret %s: %w", a.Tokens, err)
	}
	if len(tenants.Data) != 1 {
		return "", fmt.Errorf("the agents' tenants Secret %s has %d keys; it needs exactly one, the controller's tenant and its token (the chart makes it with agent.replication.enabled)", a.Tokens, len(tenants.Data))
	}
	var token string
	for _, v := range tenants.Data {
		token = string(v)
	}
	return token, nil
}

// httpClient trusts the agents' CA; clients are kept by CA, so that
// connections are reused.
func (a *Agents) httpClient(ctx context.Context) (*http.Client, error) {
	if a.CA.Name == "" {
		return &http.Client{Timeout: a.Timeout}, nil
	}
	secret := &corev1.Secret{}
	if err := a.Client.Get(ctx, a.CA, secret); err != nil {
		return nil, fmt.Errorf("the agents' CA Secret %s: %w", a.CA, err)
	}
	pem := secret.Data["ca.crt"]
	if c, ok := a.clients.Load(string(pem)); ok {
		return c.(*http.Client), nil
	}
	c, err := volumeapi.TrustingCA(pem, a.Timeout)
	if err != nil {
		return nil, fmt.Errorf("the agents' CA Secret %s: its ca.crt: %w; it should hold the CA the chart made (agent.replication.enabled)", a.CA, err)
	}
	actual, _ := a.clients.LoadOrStore(string(pem), c)
	return actual.(*http.Client), nil
}
