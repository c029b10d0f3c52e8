// Package replicas is what the stores of replication pairs share: the
// btrfs store (storage/agent/btrfsnode) and the LVM one
// (storage/agent/lvmnode) number their replicas alike, choose a sync's
// parent alike, and hand the volume API a replica to stream in one form,
// so that one sender and one receiver route serve both (docs/failover.md).
package replicas

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"slices"
	"time"
)

// Outgoing is a replica made on the sending side, to be streamed to the
// peer.
type Outgoing struct {
	// Seq is the replica's number; Parent the newest replica both sides
	// hold, which the stream builds on (0: a whole stream).
	Seq, Parent uint64
	MadeAt      time.Time
	// Stream writes the replica's stream to w: what changed since Parent,
	// in the store's own format (btrfs send, or a block delta).
	Stream func(ctx context.Context, w io.Writer) error
}

// Next is the number and parent of the next replica a sending side
// makes, given the complete replicas it holds (mine) and those its peer
// holds. The number follows every replica either side has had, so that
// no number ever names two different replicas; the parent is the newest
// replica both hold. stale are this side's replicas the peer never got:
// no stream can build on them, so the store removes them.
func Next(mine, peerHolds []uint64) (seq, parent uint64, stale []uint64) {
	seq = 1
	for _, s := range slices.Concat(peerHolds, mine) {
		seq = max(seq, s+1)
	}
	for _, s := range mine {
		switch {
		case !slices.Contains(peerHolds, s):
			stale = append(stale, s)
		case s > parent:
			parent = s
		}
	}
	return seq, parent, stale
}

// Follows says whether a stream of replica seq built on parent can be
// received by a side holding the replicas have, newest last: the number
// must be new, and the parent one it holds (or none, for a whole stream).
func Follows(have []uint64, seq, parent uint64) bool {
	latest := uint64(0)
	if len(have) > 0 {
		latest = have[len(have)-1]
	}
	return seq > latest && (parent == 0 || slices.Contains(have, parent))
}

// MinTokenLength is the shortest token a pair takes.
const MinTokenLength = 32

// TokenHash is what a store keeps of a pair's token: its SHA-256, so
// that a copy of the store's records does not let anyone send replicas.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenMatches compares a presented token with the stored hash in
// constant time.
func TokenMatches(hash, token string) bool {
	return subtle.ConstantTimeCompare([]byte(TokenHash(token)), []byte(hash)) == 1
}
