package btrfsnode

import "github.com/strata-gitops/strata/storage/agent/volumeapi/wire"

// The store answers in the node API's wire types; it keeps its records
// on disk in types of its own (records.go).
type (
	Volume          = wire.Volume
	Snapshot        = wire.Snapshot
	Source          = wire.Source
	Tuning          = wire.Tuning
	CreateRequest   = wire.CreateRequest
	UpdateRequest   = wire.UpdateRequest
	SnapshotRequest = wire.SnapshotRequest
	CloneRequest    = wire.CloneRequest
)

// DefaultMinSize is the smallest volume the store makes.
const DefaultMinSize = wire.DefaultMinSize
