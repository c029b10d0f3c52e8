// Package lvm manages physical volumes, volume groups and logical volumes
// through one interface with two implementations: LVM2, the lvm2 tools
// (production), and Loopback, which keeps the volume groups real but makes
// each logical volume a sparse file attached as a loop device, for
// machines whose kernel has no device-mapper (docs/lvm.md).
package lvm

import (
	"context"
	"errors"
	"fmt"
)

// Manager is what the node agent needs from a volume manager. Sizes are
// bytes. Every method is safe to repeat after a crash: a create of
// something that exists fails with ErrExists, a remove of something gone
// with ErrNotFound, and the caller decides what that means.
type Manager interface {
	PhysicalVolumes(ctx context.Context) ([]PhysicalVolume, error)
	VolumeGroups(ctx context.Context) ([]VolumeGroup, error)
	// CreatePhysicalVolume never wipes: a device with a signature fails.
	CreatePhysicalVolume(ctx context.Context, device string) error
	CreateVolumeGroup(ctx context.Context, name string, devices, tags []string) error
	ExtendVolumeGroup(ctx context.Context, name string, devices []string) error
	// RemoveVolumeGroup removes a group with every volume in it, and the
	// LVM labels of its devices: all its data. Only for an explicit opt-in.
	RemoveVolumeGroup(ctx context.Context, name string) error

	LogicalVolumes(ctx context.Context, vg string) ([]LogicalVolume, error)
	CreateThinPool(ctx context.Context, vg string, pool ThinPoolSpec) error
	// ExtendThinPool grows a pool's data and metadata to the given sizes,
	// online; zero keeps a size.
	ExtendThinPool(ctx context.Context, vg, pool string, size, metadataSize uint64) error
	// CreateVolume creates a thick volume, or a thin one when spec.Pool is set.
	CreateVolume(ctx context.Context, vg string, spec VolumeSpec) error
	// CreateSnapshot makes a thin snapshot of a thin volume.
	CreateSnapshot(ctx context.Context, vg, name, origin string, tags []string) error
	// ResizeVolume grows a volume; shrinking fails with ErrShrink.
	ResizeVolume(ctx context.Context, vg, name string, size uint64) error
	RemoveVolume(ctx context.Context, vg, name string) error
	// DevicePath is the block device of an active volume.
	DevicePath(ctx context.Context, vg, name string) (string, error)
}

// PhysicalVolume is a device initialised for LVM.
type PhysicalVolume struct {
	Device      string
	VolumeGroup string // empty when in none
	Size, Free  uint64
}

// VolumeGroup is a pool of physical volumes.
type VolumeGroup struct {
	Name       string
	Size, Free uint64
	Tags       []string
	Devices    []string
}

// HasTag reports whether the group carries tag.
func (vg VolumeGroup) HasTag(tag string) bool {
	for _, t := range vg.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// LogicalVolume is a volume, a thin pool or a thin snapshot.
type LogicalVolume struct {
	Name, VolumeGroup string
	Size              uint64
	Kind              Kind
	Pool              string // the thin pool of a thin volume
	Origin            string // the volume a snapshot was taken of
	Tags              []string
	// Thin pools only: how full data and metadata are, 0-100.
	DataPercent, MetadataPercent float64
	MetadataSize                 uint64
}

// Kind tells volumes, thin volumes and thin pools apart.
type Kind string

// The kinds of logical volume.
const (
	Thick    Kind = "thick"
	Thin     Kind = "thin"
	ThinPool Kind = "thin-pool"
)

// ThinPoolSpec describes a thin pool to create.
type ThinPoolSpec struct {
	Name                    string
	Size                    uint64
	MetadataSize, ChunkSize uint64 // zero: lvm2's choice
}

// VolumeSpec describes a volume to create.
type VolumeSpec struct {
	Name string
	Size uint64
	Pool string // thin pool; empty for a thick volume
	Tags []string
}

// Errors the caller can act on. They come from the tools' JSON reports
// and from checks made before a command runs, never from reading the
// tools' messages.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrNoSpace  = errors.New("not enough free space")
	ErrShrink   = errors.New("shrinking is not supported")
	ErrNotThin  = errors.New("not a thin volume")
	ErrInUse    = errors.New("in use")
)

// named wraps a sentinel error with the object it is about.
func named(err error, what string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(what, args...), err)
}
