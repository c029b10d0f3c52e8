package skipapply

import (
	"os"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
