// Package contracttest is the storage contract's suite: what every node
// backend's pairs promise (contract.Pairs), checked the same way against
// each: btrfs, LVM and the in-memory backend the fast failover tests
// run on. A backend's test gives it two sides of a pair and runs Run.
package contracttest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// Pair is the name of the pair a Backend sets up on both sides.
const Pair = "p"

// Token is the pair's token on both sides.
const Token = "0123456789abcdef0123456789abcdef"

// Size is how many bytes of its volume a test writes.
const Size = 1 << 20

// Side is one node's end of pair Pair, set up with Token, of one volume
// of at least Size bytes.
type Side struct {
	Pairs  contract.Pairs
	Tenant string
	// Write writes data at the start of the pair's volume, as the app on
	// it does; an error when the volume refuses writes.
	Write func(data []byte) error
	// Read reads the volume's first n bytes.
	Read func(n int) ([]byte, error)
	// Restart is the backend again after its agent restarted, opened
	// over what it left as the agent opens it at start.
	Restart func() contract.Pairs
}

// Backend makes the two sides of a new pair.
type Backend func(t *testing.T) (a, b *Side)

// Run runs the suite against the backend.
func Run(t *testing.T, backend Backend) {
	t.Run("ACutSyncKeepsTheLastReplica", func(t *testing.T) { aCutSyncKeepsTheLastReplica(t, backend) })
	t.Run("PromoteIsAtomicAndResumable", func(t *testing.T) { promoteIsAtomicAndResumable(t, backend) })
	t.Run("AFenceStopsWriters", func(t *testing.T) { aFenceStopsWriters(t, backend) })
}

// cut is where a stream stops: after how many of its n bytes, and
// whether the receiver's check of its end fails although it all came.
type cut struct {
	name  string
	bytes func(n int) int
	whole error
}

var cuts = []cut{
	{"before the first byte", func(int) int { return 0 }, nil},
	{"after the first byte", func(int) int { return 1 }, nil},
	{"halfway", func(n int) int { return n / 2 }, nil},
	{"before the last byte", func(n int) int { return n - 1 }, nil},
	{"whole but its trailer wrong", func(n int) int { return n }, errors.New("the stream's length and CRC trailer do not match")},
}

// sync sends the next replica from one side to the other; c, when set,
// cuts the stream.
func sync(t *testing.T, from, to *Side, c *cut) error {
	t.Helper()
	ctx := context.Background()
	peer := pairOf(t, to)
	out, err := from.Pairs.SnapshotForSend(ctx, from.Tenant, Pair, peer.Replicas)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := out.Stream(ctx, &stream); err != nil {
		t.Fatal(err)
	}
	body, whole := io.Reader(&stream), error(nil)
	if c != nil {
		body, whole = io.LimitReader(&stream, int64(c.bytes(stream.Len()))), c.whole
	}
	if _, err := to.Pairs.Receive(ctx, to.Tenant, Pair, out.Seq, out.Parent, out.MadeAt, body, func() error { return whole }); err != nil {
		return err
	}
	return from.Pairs.Sent(ctx, from.Tenant, Pair, out.Seq)
}

func pairOf(t *testing.T, s *Side) wire.Pair {
	t.Helper()
	p, err := s.Pairs.GetPair(context.Background(), s.Tenant, Pair)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func data(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, Size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func write(t *testing.T, s *Side, d []byte) {
	t.Helper()
	if err := s.Write(d); err != nil {
		t.Fatal(err)
	}
}

func wantHolds(t *testing.T, s *Side, want []byte, what string) {
	t.Helper()
	got, err := s.Read(len(want))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the volume does not hold %s", what)
	}
}

// A sync cut at any point, or whole but failing its end check, leaves
// the last whole replica the newest; the next sync goes on from it, and
// a promotion serves what it sent.
func aCutSyncKeepsTheLastReplica(t *testing.T, backend Backend) {
	a, b := backend(t)
	write(t, a, data(1))
	if err := sync(t, a, b, nil); err != nil {
		t.Fatal(err)
	}
	first := pairOf(t, b)
	write(t, a, data(2))
	for _, c := range cuts {
		if err := sync(t, a, b, &c); err == nil {
			t.Fatalf("a stream cut %s was taken", c.name)
		}
		if got := pairOf(t, b); got.Latest != first.Latest || slices.ContainsFunc(got.Replicas, func(s uint64) bool { return s > first.Latest }) {
			t.Fatalf("after a stream cut %s the receiver holds %+v, want its last whole replica %d the newest", c.name, got, first.Latest)
		}
	}
	if err := sync(t, a, b, nil); err != nil {
		t.Fatalf("the sync after the cut ones: %v", err)
	}
	if got := pairOf(t, b); got.Latest <= first.Latest {
		t.Fatalf("after a whole sync the receiver's newest replica is %d, want newer than %d", got.Latest, first.Latest)
	}
	if _, err := b.Pairs.Promote(context.Background(), b.Tenant, Pair); err != nil {
		t.Fatal(err)
	}
	wantHolds(t, b, data(2), "what the last whole sync sent")
}

// A promotion with no replica is refused (NotFound) and changes nothing;
// one with a replica serves it whole; asked again, as a controller that
// crashed before it recorded the answer asks, it serves the same.
func promoteIsAtomicAndResumable(t *testing.T, backend Backend) {
	ctx := context.Background()
	a, b := backend(t)
	write(t, b, data(3))
	if _, err := b.Pairs.Promote(ctx, b.Tenant, Pair); contract.KindOf(err) != contract.NotFound {
		t.Fatalf("promoting a pair with no replica: %v, want NotFound", err)
	}
	wantHolds(t, b, data(3), "what it held before a refused promotion")
	write(t, a, data(4))
	if err := sync(t, a, b, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.Pairs.Promote(ctx, b.Tenant, Pair); err != nil {
			t.Fatal(err)
		}
		wantHolds(t, b, data(4), "the promoted replica")
	}
	if err := sync(t, a, b, nil); err != nil {
		t.Fatalf("a sync after the promotion: %v", err)
	}
}

// A fence stops the volume's writers and refuses new ones, says so on
// the pair, holds across a restart of the agent, and goes only when
// unfenced.
func aFenceStopsWriters(t *testing.T, backend Backend) {
	ctx := context.Background()
	a, _ := backend(t)
	write(t, a, data(5))
	if _, err := a.Pairs.FencePair(ctx, a.Tenant, Pair); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(data(6)); err == nil {
		t.Fatal("a fenced volume took a write")
	}
	if !pairOf(t, a).Fenced {
		t.Fatal("the fenced pair does not say it is fenced")
	}
	a.Pairs = a.Restart()
	if err := a.Write(data(6)); err == nil || !pairOf(t, a).Fenced {
		t.Fatalf("after a restart the fence is gone (write: %v)", err)
	}
	wantHolds(t, a, data(5), "what it held when fenced")
	if _, err := a.Pairs.UnfencePair(ctx, a.Tenant, Pair); err != nil {
		t.Fatal(err)
	}
	write(t, a, data(6))
	if pairOf(t, a).Fenced {
		t.Fatal("the unfenced pair says it is fenced")
	}
	fenced, err := a.Pairs.FencePairs(ctx)
	if err != nil || len(fenced) == 0 {
		t.Fatalf("FencePairs fenced %v (%v), want the pair's volume", fenced, err)
	}
	if err := a.Write(data(7)); err == nil {
		t.Fatal("a volume FencePairs fenced took a write")
	}
}
