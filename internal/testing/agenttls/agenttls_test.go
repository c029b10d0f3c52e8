package agenttls

import (
	"crypto/x509"
	"net/http"
	"testing"
)

// An agent's certificate carries an ECDSA key; an RSA one made the
// benchmarks' first calls several times dearer than an agent's.
func TestServesAnECDSACertificateFromTheOneCA(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	first, err := Serve(ok)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Srv.Close()
	second, err := Serve(ok)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Srv.Close()

	// The first one's client trusts the second agent: one CA for all.
	resp, err := first.Client.Get(second.Srv.URL)
	if err != nil {
		t.Fatalf("a client of one agent calling another: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %s", resp.Status)
	}
	if alg := resp.TLS.PeerCertificates[0].PublicKeyAlgorithm; alg != x509.ECDSA {
		t.Errorf("the agent's certificate has a %s key, want ECDSA as the agent's", alg)
	}
}
