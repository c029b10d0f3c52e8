package volumeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
)

// certificateWait bounds how long an agent waits for strata's controller
// to sign its serving certificate.
const certificateWait = 2 * time.Minute

// RequestCertificate has strata's controller, which alone holds the
// agents' CA key, sign a serving certificate for this node's agent: a
// CertificateSigningRequest for signer storagev1alpha1.AgentSigner,
// which the controller signs for the requesting agent's own node only
// (package agentcerts). The key never leaves this process.
//
// w makes the request and r reads it back: r must read the API server
// directly, since an agent may not list or watch requests, which a cached
// reader would.
func RequestCertificate(ctx context.Context, w client.Writer, r client.Reader, node string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: node}}, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	sum := sha256.Sum256(der)
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "strata-agent-" + node + "-" + hex.EncodeToString(sum[:6])},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: storagev1alpha1.AgentSigner,
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}
	if err := w.Create(ctx, csr); err != nil && !apierrors.IsAlreadyExists(err) {
		return tls.Certificate{}, fmt.Errorf("asking strata's controller for this agent's certificate (CertificateSigningRequest %s): %w", csr.Name, err)
	}
	chain, err := waitForCertificate(ctx, r, csr.Name)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key}, nil
}

// waitForCertificate polls the request until it is signed, and returns
// the certificate's chain, DER; a denial or failure is an error naming
// why.
func waitForCertificate(ctx context.Context, c client.Reader, name string) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, certificateWait)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		csr := &certificatesv1.CertificateSigningRequest{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, csr); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("CertificateSigningRequest %s: %w", name, err)
		}
		for _, cond := range csr.Status.Conditions {
			if (cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed) && cond.Status == corev1.ConditionTrue {
				return nil, fmt.Errorf("strata's controller refused this agent's CertificateSigningRequest %s: %s", name, cond.Message)
			}
		}
		if len(csr.Status.Certificate) > 0 {
			return chainOf(csr.Status.Certificate)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("CertificateSigningRequest %s was not signed within %s: is strata's controller running with --agent-ca-secret?", name, certificateWait)
		case <-tick.C:
		}
	}
}

// chainOf reads PEM certificates into DER, leaf first.
func chainOf(data []byte) ([][]byte, error) {
	var chain [][]byte
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			chain = append(chain, block.Bytes)
		}
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("the signed certificate holds no PEM certificate")
	}
	return chain, nil
}
