package testenv

import (
	"testing"

	"github.com/strata-gitops/strata/internal/netaddr"
)

// FreeAddr is a loopback host:port nothing listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := netaddr.Free()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
