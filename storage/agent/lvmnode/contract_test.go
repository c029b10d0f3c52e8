package lvmnode

import (
	"context"
	"os"
	"testing"

	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/contract/contracttest"
)

// The LVM backend keeps the storage contract.
func TestContract(t *testing.T) {
	n := 0
	contracttest.Run(t, func(t *testing.T) (a, b *contracttest.Side) {
		n += 2
		return contractSide(t, n-1), contractSide(t, n)
	})
}

// contractSide is a side of its own volume group, pair p of its thin
// volume db; the app's data is the volume's first bytes.
func contractSide(t *testing.T, n int) *contracttest.Side {
	t.Helper()
	s := newSide(t, "c"+string(rune('a'+n)), 16*mib)
	side := &contracttest.Side{Pairs: s.store, Tenant: tenant}
	side.Write = func(data []byte) error {
		f, _, err := s.store.open(context.Background(), s.vg, "db", os.O_WRONLY)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.WriteAt(data, 0); err != nil {
			return err
		}
		return f.Sync()
	}
	side.Read = func(size int) ([]byte, error) { return s.read(t, "db")[:size], nil }
	side.Restart = func() contract.Pairs {
		again := &Store{LVM: s.store.LVM, Dir: s.store.Dir}
		if _, err := again.RestoreFences(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.store = again
		return again
	}
	return side
}
