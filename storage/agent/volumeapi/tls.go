package volumeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TLSFiles are where an agent's API finds its TLS: a certificate and key
// of its own (Cert, Key); or, the chart's way, a certificate strata's
// controller signs for Node (Request), chaining to CACert; or a CA
// (CACert, CAKey) that issues one at start for the names and addresses
// of Node, for an agent outside a cluster.
type TLSFiles struct {
	Cert, Key, CACert, CAKey string
	// Request asks strata's controller for the certificate
	// (RequestCertificate): the CA's key stays with the controller.
	Request bool
	Node    string
}

// ServerTLS is the TLS configuration the API serves with: the given
// certificate and key, or one strata's controller signs (asked through
// w, read back through r, which reads the API server directly), or else
// one the given CA issues at start for this host's names and addresses;
// nil serves plain HTTP.
func (o TLSFiles) ServerTLS(ctx context.Context, w client.Writer, r client.Reader) (*tls.Config, error) {
	switch {
	case o.Request:
		if w == nil || r == nil || o.Node == "" {
			return nil, fmt.Errorf("--volume-api-tls-request needs a Kubernetes API and the agent's node ($NODE_NAME)")
		}
		cert, err := RequestCertificate(ctx, w, r, o.Node)
		if err != nil {
			return nil, err
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	case o.Cert != "" || o.Key != "":
		cert, err := tls.LoadX509KeyPair(o.Cert, o.Key)
		if err != nil {
			return nil, fmt.Errorf("--volume-api-tls-cert/--volume-api-tls-key: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	case o.CACert != "" || o.CAKey != "":
		caCert, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("--volume-api-tls-ca-cert: %w", err)
		}
		caKey, err := os.ReadFile(o.CAKey)
		if err != nil {
			return nil, fmt.Errorf("--volume-api-tls-ca-key: %w", err)
		}
		names, ips, err := hostIdentity(o.Node)
		if err != nil {
			return nil, err
		}
		cert, err := Issue(caCert, caKey, names, ips, 365*24*time.Hour)
		if err != nil {
			return nil, err
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	}
	return nil, nil
}

// PeerHTTP is the client this agent sends replicas to its peers with.
// Agents that issue their certificates from one CA (the chart's) trust
// that CA in each other; agents with certificates of their own trust the
// system's roots.
func (o TLSFiles) PeerHTTP() (*http.Client, error) {
	if o.CACert == "" {
		return http.DefaultClient, nil
	}
	caCert, err := os.ReadFile(o.CACert)
	if err != nil {
		return nil, fmt.Errorf("--volume-api-tls-ca-cert: %w", err)
	}
	c, err := TrustingCA(caCert, 0)
	if err != nil {
		return nil, fmt.Errorf("--volume-api-tls-ca-cert %s: %w", o.CACert, err)
	}
	return c, nil
}

// TrustingCA is an HTTP client that trusts only the CA certificates in
// caPEM, with the timeout (0: none).
func TrustingCA(caPEM []byte, timeout time.Duration) (*http.Client, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no PEM certificate in it")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	KeepConnections(transport)
	return &http.Client{Timeout: timeout, Transport: transport}, nil
}

// KeepConnections lets a transport keep as many idle connections to an
// agent as a CSI controller sends calls at once. Go's default keeps two:
// every call past them paid a new TLS handshake.
func KeepConnections(t *http.Transport) { t.MaxIdleConnsPerHost = 64 }

// hostIdentity is what a serving certificate of this host names: its
// host name, its node name, localhost, and every address of its
// interfaces (the agent runs on the host network).
func hostIdentity(node string) ([]string, []net.IP, error) {
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	if node != "" {
		names = append(names, node)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, nil, fmt.Errorf("listing this host's addresses for its certificate: %w", err)
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return names, ips, nil
}

// Issue makes a serving certificate for names and ips, signed by the CA
// (PEM certificate and key), valid for the given time.
func Issue(caCertPEM, caKeyPEM []byte, names []string, ips []net.IP, valid time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	chain, err := Sign(caCertPEM, caKeyPEM, &key.PublicKey, names, ips, valid)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key}, nil
}

// Sign makes a serving certificate of public key pub for names (the
// first is its common name) and ips, signed by the CA (PEM certificate
// and key), valid for the given time; it returns the certificate and the
// CA's, DER. Agents' certificates are made here, whoever holds the CA.
func Sign(caCertPEM, caKeyPEM []byte, pub any, names []string, ips []net.IP, valid time.Duration) ([][]byte, error) {
	ca, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("the volume API's CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("the volume API's CA: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour), // a clock a little behind still accepts it
		NotAfter:     now.Add(valid),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caCert, pub, ca.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("issuing the volume API's certificate: %w", err)
	}
	return [][]byte{der, caCert.Raw}, nil
}

// NewCA makes a CA for the volume API: its certificate and key, in PEM.
// The chart makes its own with Helm; this one serves environments
// without Helm (the CSI test environment).
func NewCA(name string, valid time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	template := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(valid), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
