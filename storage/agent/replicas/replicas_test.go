package replicas

import (
	"slices"
	"testing"
)

func TestTheNextReplicaBuildsOnTheNewestBothHold(t *testing.T) {
	for _, c := range []struct {
		name        string
		mine, peer  []uint64
		seq, parent uint64
		stale       []uint64
	}{
		{"first sync", nil, nil, 1, 0, nil},
		{"incremental", []uint64{3}, []uint64{3}, 4, 3, nil},
		// A replica this side made whose stream never arrived is dropped,
		// and its number is not used again.
		{"the last stream was lost", []uint64{3, 4}, []uint64{3}, 5, 3, []uint64{4}},
		// Failback: the peer's replicas are newer than any of this side's.
		{"the other way round", []uint64{3}, []uint64{3, 7}, 8, 3, nil},
		{"nothing in common", []uint64{2}, []uint64{5}, 6, 0, []uint64{2}},
	} {
		seq, parent, stale := Next(c.mine, c.peer)
		if seq != c.seq || parent != c.parent || !slices.Equal(stale, c.stale) {
			t.Errorf("%s: Next(%v, %v) = %d, %d, %v; want %d, %d, %v", c.name, c.mine, c.peer, seq, parent, stale, c.seq, c.parent, c.stale)
		}
	}
}

func TestAStreamMustFollowWhatTheReceiverHolds(t *testing.T) {
	have := []uint64{2, 3}
	for _, c := range []struct {
		seq, parent uint64
		ok          bool
	}{{4, 3, true}, {4, 2, true}, {4, 0, true}, {3, 2, false}, {5, 4, false}} {
		if got := Follows(have, c.seq, c.parent); got != c.ok {
			t.Errorf("Follows(%v, %d, %d) = %v; want %v", have, c.seq, c.parent, got, c.ok)
		}
	}
	if !Follows(nil, 1, 0) || Follows(nil, 2, 1) {
		t.Error("an empty side takes only a whole stream")
	}
}
