package volumeusage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelets reads nodes' kubelets' stats summaries on their own port, as
// metrics-server does, not through the API server's node proxy (whose
// permission, nodes/proxy, opens the kubelets' exec and logs as well).
type Kubelets struct {
	HTTP *http.Client
	// Token is sent as the bearer: a token that may read nodes' stats
	// and nothing else (ServiceAccountTokens), since a node names the
	// address it is sent to.
	Token func(ctx context.Context) (string, error)
}

// NewKubelets trusts the kubelets' serving certificates signed by roots,
// or, with roots nil, any certificate: most clusters' kubelets serve a
// self-signed one, and what goes to them is a token that reads stats only.
func NewKubelets(roots *x509.CertPool, token func(ctx context.Context) (string, error)) *Kubelets {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, InsecureSkipVerify: roots == nil} //nolint:gosec // the documented choice above
	return &Kubelets{Token: token, HTTP: &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: tlsConfig, ResponseHeaderTimeout: 10 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// defaultKubeletPort is where a kubelet serves when its node does not say.
const defaultKubeletPort = 10250

// Summary is node's kubelet's /stats/summary, at the node's internal
// address: an IP address, never a name to resolve.
func (k *Kubelets) Summary(ctx context.Context, node *corev1.Node) (io.ReadCloser, error) {
	ip := internalIP(node)
	if ip == nil {
		return nil, fmt.Errorf("node %s has no InternalIP address", node.Name)
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 || port > 65535 {
		port = defaultKubeletPort
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(ip.String(), strconv.Itoa(port))+"/stats/summary", nil)
	if err != nil {
		return nil, err
	}
	if k.Token != nil {
		token, err := k.Token(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := k.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("the kubelet of node %s answered %s to GET /stats/summary (it needs nodes/stats)", node.Name, resp.Status)
	}
	return resp.Body, nil
}

func internalIP(node *corev1.Node) net.IP {
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip := net.ParseIP(a.Address); ip != nil {
				return ip
			}
		}
	}
	return nil
}

// ServiceAccountTokens makes short-lived tokens of one service account
// (TokenRequest), each kept until two minutes before it expires.
type ServiceAccountTokens struct {
	Client          client.Client
	Namespace, Name string
	mu              sync.Mutex
	token           string
	expires         time.Time
}

// tokenLifetime is the shortest the API server grants.
const tokenLifetime = 10 * time.Minute

// Token is a token of the service account.
func (t *ServiceAccountTokens) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Until(t.expires) > 2*time.Minute {
		return t.token, nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime.Seconds()))}}
	if err := t.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("a token of service account %s/%s for reading the kubelets' stats: %w", t.Namespace, t.Name, err)
	}
	t.token, t.expires = tr.Status.Token, tr.Status.ExpirationTimestamp.Time
	return t.token, nil
}
