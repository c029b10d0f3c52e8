package cluster

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// servingCertificates writes the API server's serving certificate, valid
// for every address it is reached at (localhost, the host's address on
// the nodes' network, the kubernetes Service's cluster IP and names), and
// the service-account signing key, under the file names envtest uses. It
// returns the CA that signed the serving certificate. Existing files are
// kept, so that a restarted cluster's clients keep trusting it.
func servingCertificates(dir string, hostIP, serviceIP netip.Addr) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	crt, key := filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	if _, err := os.Stat(crt); errors.Is(err, os.ErrNotExist) {
		ips := []net.IP{net.ParseIP("127.0.0.1"), hostIP.AsSlice(), serviceIP.AsSlice()}
		names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("strata-apiserver", ips, names)
		if err != nil {
			return nil, err
		}
		if err := writeAll(map[string][]byte{crt: certPEM, key: keyPEM}); err != nil {
			return nil, err
		}
		if err := serviceAccountSigner(dir); err != nil {
			return nil, err
		}
	}
	ca, err := issuerOf(crt)
	if err != nil {
		return nil, err
	}
	// The controller manager publishes it to every namespace, for pods.
	return ca, os.WriteFile(filepath.Join(dir, "serving-ca.crt"), ca, 0o644)
}

// serviceAccountSigner writes the key the API server signs service
// account tokens with, and its certificate, which verifies them.
func serviceAccountSigner(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "strata-service-accounts"}, key)
	if err != nil {
		return err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	return writeAll(map[string][]byte{
		filepath.Join(dir, "sa-signer.key"): keyPEM,
		filepath.Join(dir, "sa-signer.crt"): pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
	})
}

// issuerOf is the last certificate of a chain file: client-go writes the
// serving certificate followed by the CA that signed it.
func issuerOf(chainFile string) ([]byte, error) {
	data, err := os.ReadFile(chainFile)
	if err != nil {
		return nil, err
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil || len(certs) < 2 {
		return nil, fmt.Errorf("%s holds no certificate chain: remove it and start again (%v)", chainFile, err)
	}
	ca := certs[len(certs)-1]
	if !ca.IsCA {
		return nil, fmt.Errorf("%s: the last certificate is not a CA: remove it and start again", chainFile)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), nil
}

func writeAll(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
