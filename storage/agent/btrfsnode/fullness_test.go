package btrfsnode

import (
	"strings"
	"testing"
)

// A filesystem passing the threshold is told once, not while it stays
// full; once below, a new crossing is told again.
func TestAFullFilesystemIsToldOncePerCrossing(t *testing.T) {
	var told []string
	free := int64(50)
	f := &Fullness{Base: "/srv/strata", Notice: func(reason, msg string) { told = append(told, reason+": "+msg) },
		Free: func(string) (int64, int64, error) { return 100 << 20, free << 20, nil }}
	for _, fr := range []int64{50, 9, 5, 9, 20, 8} {
		free = fr
		f.Check()
	}
	if len(told) != 2 || !strings.Contains(told[0], "BtrfsHostFull: the btrfs filesystem under /srv/strata is 91.0% full (threshold 90%), 9 MiB free") {
		t.Fatalf("told %q", told)
	}
}
