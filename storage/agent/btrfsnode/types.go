package btrfsnode

import "github.com/strata-gitops/strata/storage/agent/volumeapi/wire"

// The store keeps its records in the API's wire form.
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
