// Package lvmtest gives tests a loopback volume manager of their own. It
// is apart from testenv because storage/lvm's own tests use testenv.
package lvmtest

import (
	"testing"

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
