package volumegroups

import (
	"strings"
	"testing"

	"github.com/strata-gitops/strata/storage/lvm"
)

func TestThinCapacity(t *testing.T) {
	pool := lvm.LogicalVolume{Name: "pool", Kind: lvm.ThinPool, Size: 100}
	lvs := []lvm.LogicalVolume{pool,
		{Name: "a", Kind: lvm.Thin, Pool: "pool", Size: 300},
		{Name: "b", Kind: lvm.Thin, Pool: "other", Size: 999},
		{Name: "c", Kind: lvm.Thick, Size: 999}}
	if got := thinCapacity(pool, lvs, 5); got != 200 {
		t.Errorf("capacity %d, want 5x100-300 = 200", got)
	}
	if got := thinCapacity(pool, append(lvs, lvm.LogicalVolume{Name: "d", Kind: lvm.Thin, Pool: "pool", Size: 900}), 5); got != 0 {
		t.Errorf("overpromised pool: capacity %d, want 0", got)
	}
}

// Above the threshold a pool takes no new volume, whatever the ratio says.
func TestFullPoolsTakeNoNewVolume(t *testing.T) {
	r := &Reconciler{}
	for _, tc := range []struct {
		data, metadata float64
		want           string
	}{{50, 50, ""}, {90, 10, "data 90.0% full"}, {10, 95.5, "metadata 95.5% full"}} {
		got := r.fullness(lvm.LogicalVolume{DataPercent: tc.data, MetadataPercent: tc.metadata})
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("data %.1f%%, metadata %.1f%%: %q, want %q", tc.data, tc.metadata, got, tc.want)
		}
	}
	r.FullThreshold = 99
	if got := r.fullness(lvm.LogicalVolume{DataPercent: 95}); got != "" {
		t.Errorf("threshold 99%%, 95%% full: %q", got)
	}
}
