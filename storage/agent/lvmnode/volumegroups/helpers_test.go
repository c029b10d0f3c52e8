package volumegroups_test

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	mib     = 1 << 20
	timeout = 30 * time.Second
)

// counter makes names unique within a run.
var counter atomic.Int32
