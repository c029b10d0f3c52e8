package agentcerts_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agentcerts"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// An agent gets a serving certificate for its own node from strata's
// controller, which alone holds the CA's key: the certificate chains to
// the CA and names that node's name and addresses, whatever node the
// agent asks for. Another account's request, and one whose token names
// no node, are denied with the reason, and nothing is signed.
func TestAnAgentGetsACertificateForItsOwnNodeOnly(t *testing.T) {
	env, ctx := testenv.Get(t), context.Background()
	ns := testenv.Namespace(t, env.Client, fmt.Sprintf("agentcerts-%d", os.Getpid()))
	caPEM, keyPEM, err := volumeapi.NewCA("agents", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-ca"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: caPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	create(t, env.Client, ca)
	for name, ip := range map[string]string{ns + "-a": "10.9.8.7", ns + "-b": "10.9.8.6"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		create(t, env.Client, node)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		if err := env.Client.Status().Update(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	agent, other := "system:serviceaccount:"+ns+":agent", "system:serviceaccount:"+ns+":other"
	// Both accounts may make requests: only the signer tells them apart.
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-requests"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: agent}, {Kind: "User", Name: other}}}
	create(t, env.Client, binding)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return (&agentcerts.Signer{Client: mgr.GetClient(), CA: client.ObjectKeyFromObject(ca), Agents: []string{agent}}).SetupWithManager(mgr)
	})
	as := func(account, node string) client.Client {
		cfg := testenv.ServiceAccountConfig(env.Config, ns, account)
		if node != "" {
			cfg.Impersonate.Extra = map[string][]string{storagev1alpha1.NodeNameExtra: {node}}
		}
		c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The agent on node a asks for node b's name: it gets node a's.
	cert, err := volumeapi.RequestCertificate(ctx, as("agent", ns+"-a"), as("agent", ns+"-a"), ns+"-b")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: ns + "-a", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("the agent's certificate for its node: %v", err)
	}
	if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.9.8.7")) }) ||
		slices.Contains(leaf.DNSNames, ns+"-b") || slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.9.8.6")) }) {
		t.Fatalf("the certificate names %v %v; want node a's name and address only", leaf.DNSNames, leaf.IPAddresses)
	}

	for _, c := range []struct {
		what, account, node, why string
	}{
		{"another account", "other", ns + "-a", "is not a strata agent's service account"},
		{"a token naming no node", "agent", "", "names no node"},
	} {
		requester := as(c.account, c.node)
		_, err := volumeapi.RequestCertificate(ctx, requester, requester, ns+"-a")
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v; want it refused because it %s", c.what, err, c.why)
		}
	}
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}
