package testenv

import (
	"net"
	"sync/atomic"
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

// DialCounter listens on loopback and counts the connections made to it,
// closing each: a test of a refusal checks that nothing was dialled.
type DialCounter struct {
	// Port is where it listens, on 127.0.0.1.
	Port  int
	count atomic.Int32
}

// CountDials starts a DialCounter, stopped when the test ends.
func CountDials(t testing.TB) *DialCounter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	d := &DialCounter{Port: l.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			d.count.Add(1)
			_ = conn.Close()
		}
	}()
	return d
}

// Dials is how many connections were made so far.
func (d *DialCounter) Dials() int32 { return d.count.Load() }
