package kustomization

import (
	"fmt"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/strata-gitops/strata/internal/scheme"
)

// A remote cluster's client is made once per kubeconfig and reused; a
// changed kubeconfig gets its own; the cache stays bounded.
func TestRemoteClientsAreKeptPerKubeconfig(t *testing.T) {
	var rc remoteClients
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	first, err := rc.get("a", cfg, scheme.New())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := rc.get("a", cfg, scheme.New())
	other, _ := rc.get("b", cfg, scheme.New())
	if first.client != again.client || first.client == other.client {
		t.Fatal("a kubeconfig's client was made again, or another kubeconfig got it")
	}
	for i := range maxRemoteClients + 1 {
		if _, err := rc.get(fmt.Sprint(i), cfg, scheme.New()); err != nil {
			t.Fatal(err)
		}
	}
	if len(rc.byKey) > maxRemoteClients {
		t.Fatalf("%d clients kept, more than %d", len(rc.byKey), maxRemoteClients)
	}
}
