package memstore_test

import (
	"context"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/memstore"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/contract/contracttest"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// The in-memory backend keeps the storage contract, as the real ones do.
func TestContract(t *testing.T) {
	contracttest.Run(t, func(t *testing.T) (a, b *contracttest.Side) {
		return side(t), side(t)
	})
}

func side(t *testing.T) *contracttest.Side {
	t.Helper()
	s := memstore.New()
	if err := s.Write("t", "db", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPair(context.Background(), "t", contracttest.Pair, wire.PairRequest{Volume: "db", Token: contracttest.Token}); err != nil {
		t.Fatal(err)
	}
	return &contracttest.Side{Pairs: s, Tenant: "t",
		Write:   func(data []byte) error { return s.Write("t", "db", data) },
		Read:    func(n int) ([]byte, error) { d, err := s.Read("t", "db"); return d[:min(n, len(d))], err },
		Restart: func() contract.Pairs { return s }}
}
