// Package lvmtest gives tests a volume manager of their own. It is apart
// from testenv because storage/lvm's own tests use testenv.
package lvmtest

import (
	"context"
	"os"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/guest"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/lvm"
)

// Loopback is a loopback volume manager in a temporary directory, its
// loop devices detached when the test ends.
func Loopback(t testing.TB) *lvm.Loopback {
	t.Helper()
	m, err := lvm.NewLoopback(testenv.LoopbackDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Manager is the volume manager a test makes its volume groups with:
// lvm2 in the test guest (internal/testing/guest), where device-mapper
// is, and the loopback stand-in elsewhere. A package's tests that run in
// the guest as well thus run on both.
func Manager(t testing.TB) lvm.Manager {
	t.Helper()
	if guest.InGuest() {
		return lvm.NewLVM2()
	}
	return Loopback(t)
}

// Open opens a volume's block device, closed by the caller.
func Open(t testing.TB, m lvm.Manager, vg, name string, flag int) *os.File {
	t.Helper()
	dev, err := m.DevicePath(context.Background(), vg, name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dev, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
