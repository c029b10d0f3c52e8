package volumegroups

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
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

// A pool passing the threshold is told once on its LVMCluster: not again
// while it stays full, and not for a pool below it.
func TestANewlyFullPoolIsToldOnce(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Events: rec, Node: "n1"}
	cluster := &storagev1alpha1.LVMCluster{}
	full := storagev1alpha1.DeviceClassNodeStatus{VolumeGroup: "vg", ThinPool: &storagev1alpha1.ThinPoolStatus{Name: "pool", Full: "data 91.0% full (threshold 90%)"}}
	below := storagev1alpha1.DeviceClassNodeStatus{VolumeGroup: "vg", ThinPool: &storagev1alpha1.ThinPoolStatus{Name: "pool"}}
	r.tellNewlyFull(cluster, []storagev1alpha1.DeviceClassNodeStatus{below}, full)
	r.tellNewlyFull(cluster, []storagev1alpha1.DeviceClassNodeStatus{full}, full)
	r.tellNewlyFull(cluster, nil, below)
	if len(rec.Events) != 1 {
		t.Fatalf("%d events, want 1", len(rec.Events))
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning ThinPoolFull thin pool vg/pool on node n1: data 91.0% full") {
		t.Fatalf("event %q", e)
	}
}
