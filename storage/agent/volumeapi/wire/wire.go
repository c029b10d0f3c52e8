// Package wire is the btrfs volume API's wire format: what its requests
// carry and its answers hold, as JSON. The agent's store keeps a volume's
// record in the same form; the CSI driver and any client speak it
// through volumeapi.Client.
package wire

import "time"

// DefaultMinSize is the smallest volume: btrfs needs some room for
// metadata before any file fits.
const DefaultMinSize = 1 << 20

// Source is what a clone was made from: a volume or a snapshot.
type Source struct {
	Volume   string `json:"volume,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
}

// Volume is one volume as its metadata records it, with where it is and
// how much it holds.
type Volume struct {
	Name             string    `json:"name"`
	SizeBytes        int64     `json:"sizeBytes"`
	Compression      string    `json:"compression,omitempty"`
	CompressionLevel int       `json:"compressionLevel,omitempty"`
	NoCOW            bool      `json:"nocow,omitempty"`
	UID              int       `json:"uid"`
	GID              int       `json:"gid"`
	Mode             string    `json:"mode"`
	Source           *Source   `json:"source,omitempty"`
	Clients          []string  `json:"clients,omitempty"`
	ExportID         uint16    `json:"exportId,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`

	// Filled in when read, not stored.
	Path      string `json:"path"`
	Node      string `json:"node,omitempty"`
	UsedBytes int64  `json:"usedBytes"`
	// ExportPath is what an NFS client mounts, when exported.
	ExportPath string `json:"exportPath,omitempty"`
}

// Snapshot is one read-only snapshot of a volume.
type Snapshot struct {
	Name      string    `json:"name"`
	Volume    string    `json:"volume"`
	SizeBytes int64     `json:"sizeBytes"`
	CreatedAt time.Time `json:"createdAt"`
	Path      string    `json:"path"`
	UsedBytes int64     `json:"usedBytes"`
}

// Tuning is how a volume stores data and who owns its root.
type Tuning struct {
	// Compression is zstd, lzo or zlib; empty for none.
	Compression string `json:"compression,omitempty"`
	// CompressionLevel is 1-15 for zstd and 1-9 for zlib; 0 is the default.
	CompressionLevel int `json:"compressionLevel,omitempty"`
	// NoCOW turns copy-on-write off (chattr +C), for databases and images.
	NoCOW bool `json:"nocow,omitempty"`
	UID   *int `json:"uid,omitempty"`
	GID   *int `json:"gid,omitempty"`
	// Mode is the root directory's permissions in octal, 0755 when empty.
	Mode string `json:"mode,omitempty"`
}

// CreateRequest asks for a new volume.
type CreateRequest struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"sizeBytes"`
	Tuning
}

// UpdateRequest changes a volume: a larger size, or other compression.
// Fields left nil stay as they are.
type UpdateRequest struct {
	SizeBytes        *int64  `json:"sizeBytes,omitempty"`
	Compression      *string `json:"compression,omitempty"`
	CompressionLevel *int    `json:"compressionLevel,omitempty"`
}

// SnapshotRequest asks for a read-only snapshot of a volume.
type SnapshotRequest struct {
	Name   string `json:"name"`
	Volume string `json:"volume"`
}

// CloneRequest asks for a writable copy of a volume or a snapshot as a
// new volume, at least as large as its source.
type CloneRequest struct {
	Name      string `json:"name"`
	Source    Source `json:"source"`
	SizeBytes int64  `json:"sizeBytes,omitempty"`
}

// Pair is one side of a replication pair on an agent: the read-only
// replicas of a volume this agent sent or received, numbered in order.
// Both sides keep the newest replica they share, so each sync sends
// only what changed since it, in either direction.
type Pair struct {
	Name string `json:"name"`
	// Tenant is the tenant the pair is under on this agent: a peer's
	// replica routes name it.
	Tenant string `json:"tenant"`
	// Volume is this side's volume: snapshots of it are sent, and a
	// promotion replaces its data with the newest replica.
	Volume string `json:"volume"`
	// Latest is the newest complete replica, 0 when there is none.
	Latest uint64 `json:"latest"`
	// Replicas are the complete replicas this side holds, oldest first:
	// the newest one both sides hold is the next sync's parent.
	Replicas []uint64 `json:"replicas"`
	// LatestAt is when the newest replica was made on the side that
	// sent it: the age of the data a promotion would serve.
	LatestAt *time.Time `json:"latestAt,omitempty"`
	// Fenced says the volume refuses writes: its agent fenced it after
	// losing its Lease, and nobody has unfenced it since.
	Fenced bool `json:"fenced,omitempty"`
}

// PairRequest sets up this side of a pair: its volume and the token the
// peer sends replicas with. Only the token's SHA-256 is kept.
type PairRequest struct {
	Volume string `json:"volume"`
	Token  string `json:"token"`
}

// Replica is the outcome of a sync: the replica the destination now
// holds and how many stream bytes went to it.
type Replica struct {
	Pair        string    `json:"pair"`
	Seq         uint64    `json:"seq"`
	Parent      uint64    `json:"parent,omitempty"`
	StreamBytes int64     `json:"streamBytes"`
	MadeAt      time.Time `json:"madeAt"`
	// Duration is how long the sync took, as a Go duration.
	Duration string `json:"duration"`
}

// SyncRequest asks the sending side of a pair for its next replica:
// Peer is the other agent's base URL, PeerTenant the tenant the pair is
// under there, Token the pair's token.
type SyncRequest struct {
	Peer       string `json:"peer"`
	PeerTenant string `json:"peerTenant"`
	Token      string `json:"token"`
}
