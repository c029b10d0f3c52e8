package btrfsnode_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/contract/contracttest"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// The btrfs backend keeps the storage contract.
func TestContract(t *testing.T) {
	contracttest.Run(t, func(t *testing.T) (a, b *contracttest.Side) {
		return contractSide(t), contractSide(t)
	})
}

// contractSide is a store on a btrfs of its own with volume db and the
// suite's pair; the app's data is the volume's file "data".
func contractSide(t *testing.T) *contracttest.Side {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on a loop device")
	ctx := context.Background()
	base := filepath.Join(testenv.BtrfsDisk(t, 1<<30), "strata")
	s, err := btrfsnode.Open(ctx, base, nil, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, "t", wire.CreateRequest{Name: "db", SizeBytes: 64 * mib}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPair(ctx, "t", contracttest.Pair, wire.PairRequest{Volume: "db", Token: contracttest.Token}); err != nil {
		t.Fatal(err)
	}
	side := &contracttest.Side{Pairs: s, Tenant: "t"}
	file := func() string {
		v, err := side.Pairs.(*btrfsnode.Store).Get("t", "db")
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(v.Path, "data")
	}
	side.Write = func(data []byte) error { return os.WriteFile(file(), data, 0o600) }
	side.Read = func(n int) ([]byte, error) {
		f, err := os.Open(file())
		if err != nil {
			return nil, err
		}
		defer f.Close()
		data := make([]byte, n)
		_, err = io.ReadFull(f, data)
		return data, err
	}
	side.Restart = func() contract.Pairs {
		again, err := btrfsnode.Open(ctx, base, nil, "node-a")
		if err != nil {
			t.Fatal(err)
		}
		return again
	}
	return side
}
