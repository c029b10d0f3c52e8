// Package agentcerts signs the node agents' serving certificates, so that
// the agents' CA key stays with strata's controller: an agent asks with a
// CertificateSigningRequest for signer storagev1alpha1.AgentSigner, and
// the controller signs it when it comes from an agent's service account,
// for the names and addresses of the node that account's token was issued
// on, and for nothing the request asks beyond them. A node therefore
// holds a certificate for itself, never a key that makes one for another.
package agentcerts

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// validFor is how long a signed certificate holds; an agent asks again
// at each start.
const validFor = 365 * 24 * time.Hour

// Signer signs the agents' CertificateSigningRequests.
type Signer struct {
	client.Client
	// CA is the Secret (kubernetes.io/tls) of the agents' CA, its key
	// included.
	CA client.ObjectKey
	// Agents are the user names of the agents' service accounts (the
	// node agents', the btrfs hosts'): only their requests are signed.
	Agents []string
}

// SetupWithManager watches the requests of this signer only.
func (s *Signer) SetupWithManager(mgr ctrl.Manager) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certificatesv1.CertificateSigningRequest)
		return ok && csr.Spec.SignerName == storagev1alpha1.AgentSigner
	})
	return ctrl.NewControllerManagedBy(mgr).Named("agentcerts").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(ours)).
		Complete(s)
}

// Reconcile signs or denies one request, once.
func (s *Signer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := s.Get(ctx, req.NamespacedName, csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if csr.Spec.SignerName != storagev1alpha1.AgentSigner || len(csr.Status.Certificate) > 0 || decided(csr) {
		return ctrl.Result{}, nil
	}
	node, key, err := s.check(ctx, csr)
	if err != nil {
		return ctrl.Result{}, s.deny(ctx, csr, err.Error())
	}
	certPEM, err := s.sign(ctx, node, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AgentOfItsNode",
		Message: "signed by strata's controller for node " + node.Name, LastUpdateTime: metav1.Now()})
	if err := s.SubResource("approval").Update(ctx, csr); err != nil {
		return ctrl.Result{}, err
	}
	csr.Status.Certificate = certPEM
	return ctrl.Result{}, s.Status().Update(ctx, csr)
}

// decided says the request was denied or failed already.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

// check accepts a request from an agent's service account whose token
// names its node, for server authentication, signed by the key it
// carries; it returns that node and the key.
func (s *Signer) check(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (*corev1.Node, any, error) {
	if !slices.Contains(s.Agents, csr.Spec.Username) {
		return nil, nil, fmt.Errorf("%s is not a strata agent's service account: only the agents' requests are signed", csr.Spec.Username)
	}
	nodes := csr.Spec.Extra[storagev1alpha1.NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return nil, nil, fmt.Errorf("the requester's token names no node (%s): the agent must run in a pod with a bound service account token", storagev1alpha1.NodeNameExtra)
	}
	for _, u := range csr.Spec.Usages {
		if u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageServerAuth && u != certificatesv1.UsageKeyEncipherment {
			return nil, nil, fmt.Errorf("usage %q is not a serving certificate's", u)
		}
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, nil, fmt.Errorf("spec.request holds no PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err == nil {
		err = req.CheckSignature()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("spec.request: %w", err)
	}
	node := &corev1.Node{}
	if err := s.Get(ctx, client.ObjectKey{Name: nodes[0]}, node); err != nil {
		return nil, nil, fmt.Errorf("node %s, which the requester runs on: %w", nodes[0], err)
	}
	return node, req.PublicKey, nil
}

// identity is what an agent's serving certificate names: its node's
// name and addresses, and loopback. The request's own names are not
// taken: an agent cannot ask for another node's.
func identity(node *corev1.Node) ([]string, []net.IP) {
	names := []string{node.Name, "localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			if !slices.Contains(names, a.Address) {
				names = append(names, a.Address)
			}
		}
	}
	return names, ips
}

// sign issues the certificate for node's identity and the request's key,
// from the CA Secret, as PEM: the certificate, then the CA's.
func (s *Signer) sign(ctx context.Context, node *corev1.Node, key any) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := s.Get(ctx, s.CA, secret); err != nil {
		return nil, fmt.Errorf("the agents' CA Secret %s: %w", s.CA, err)
	}
	names, ips := identity(node)
	chain, err := volumeapi.Sign(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], key, names, ips, validFor)
	if err != nil {
		return nil, fmt.Errorf("signing node %s's agent certificate with the CA Secret %s: %w", node.Name, s.CA, err)
	}
	var out []byte
	for _, der := range chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out, nil
}

// deny records why a request is refused; the agent reports it.
func (s *Signer) deny(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, why string) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NotAnAgentOfItsNode",
		Message: why, LastUpdateTime: metav1.Now()})
	return s.SubResource("approval").Update(ctx, csr)
}
