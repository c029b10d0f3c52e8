package volumegroups_test

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/lvm"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	mib     = 1 << 20
	timeout = 30 * time.Second
)

// counter makes names unique within a run.
var counter atomic.Int32

// loopback is a loopback volume manager of the test's own.
func loopback(t *testing.T) *lvm.Loopback {
	t.Helper()
	m, err := lvm.NewLoopback(testenv.LoopbackDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
