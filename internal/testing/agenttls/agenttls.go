// Package agenttls serves the tests' and benchmarks' volume APIs over TLS
// the way a node agent serves it: a certificate from the CA all agents
// share, with an ECDSA key.
package agenttls

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// Served is a volume API served over TLS as an agent serves it: with a
// certificate the agents' CA issues (an ECDSA key, as the agent's), not
// the RSA test certificate httptest serves, whose handshakes made the
// benchmarks' first calls several times slower than an agent's.
type Served struct {
	Srv    *httptest.Server
	CAPEM  []byte       // the CA a client trusts
	Client *http.Client // trusts the CA and keeps its connections
}

// theCA is the one CA of every agent a process serves, as the chart's is
// of a cluster's agents: each then trusts its peers for replication.
var theCA = sync.OnceValues(func() (ca [2][]byte, err error) {
	ca[0], ca[1], err = volumeapi.NewCA("strata-test-agents", 24*time.Hour)
	return ca, err
})

// Serve serves h on a local address the way the agent does.
func Serve(h http.Handler) (Served, error) {
	ca, err := theCA()
	if err != nil {
		return Served{}, err
	}
	caPEM, caKey := ca[0], ca[1]
	cert, err := volumeapi.Issue(caPEM, caKey, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, 24*time.Hour)
	if err != nil {
		return Served{}, err
	}
	client, err := volumeapi.TrustingCA(caPEM, 0)
	if err != nil {
		return Served{}, err
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	return Served{Srv: srv, CAPEM: caPEM, Client: client}, nil
}
