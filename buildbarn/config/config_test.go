package config

import "testing"

// Claims are sized as upstream sizes them: 32 GiB of CAS blocks with a
// 400 MiB map is a 33Gi claim; small caches round up to 1Gi.
func TestClaimBytes(t *testing.T) {
	const gib, mib = int64(1) << 30, int64(1) << 20
	for _, tc := range []struct {
		size StoreSize
		want int64
	}{
		{StoreSize{Blocks: 32 * gib, KeyLocationMap: 400 * mib}, 33 * gib},
		{StoreSize{Blocks: 20 * mib, KeyLocationMap: mib}, gib},
		{StoreSize{Blocks: gib, KeyLocationMap: 32 * mib}, 2 * gib},
		{StoreSize{Blocks: gib - 16*mib - 8*mib, KeyLocationMap: 0}, gib},
	} {
		if got := tc.size.ClaimBytes(); got != tc.want {
			t.Errorf("ClaimBytes(%+v) = %d, want %d", tc.size, got, tc.want)
		}
	}
}

// Named shards move only the added or removed shards' blobs.
func TestReshardFraction(t *testing.T) {
	for _, tc := range []struct {
		from, to int32
		want     float64
	}{{2, 3, 1.0 / 3}, {3, 2, 1.0 / 3}, {4, 4, 0}, {1, 4, 0.75}, {0, 2, 1}} {
		if got := ReshardFraction(tc.from, tc.to); got != tc.want {
			t.Errorf("ReshardFraction(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
