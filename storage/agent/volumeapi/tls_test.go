package volumeapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// A certificate the CA issues is trusted by a client that trusts the CA,
// for the names and addresses it was issued for, and by no other client.
func TestIssuedCertificatesChainToTheCA(t *testing.T) {
	caCert, caKey, err := volumeapi.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := volumeapi.Issue(caCert, caKey, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caCert)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := trusting.Get(srv.URL)
	if err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	_ = resp.Body.Close()

	otherCA, _, err := volumeapi.NewCA("other-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other := x509.NewCertPool()
	other.AppendCertsFromPEM(otherCA)
	for name, c := range map[string]*http.Client{
		"the system's roots": {},
		"another CA":         {Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: other, MinVersion: tls.VersionTLS12}}},
	} {
		if resp, err := c.Get(srv.URL); err == nil {
			_ = resp.Body.Close()
			t.Errorf("a client trusting %s accepted the agent's certificate", name)
		}
	}
}
