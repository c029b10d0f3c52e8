package lvm

import (
	"context"
	"errors"
)

// The checks every Manager makes before it changes anything, so that both
// implementations fail the same way, with typed errors.

// volumeFinder is a Manager that can look one volume up for less than
// listing the group.
type volumeFinder interface {
	findVolume(ctx context.Context, vg, name string) (LogicalVolume, error)
}

// FindVolume returns one logical volume of the group, or ErrNotFound.
func FindVolume(ctx context.Context, m Manager, vg, name string) (LogicalVolume, error) {
	find, err := lookup(ctx, m, vg)
	if err != nil {
		return LogicalVolume{}, err
	}
	lv, ok, err := find(name)
	if err == nil && !ok {
		err = named(ErrNotFound, "logical volume %s/%s", vg, name)
	}
	return lv, err
}

// Named picks a volume out of a list already read.
func Named(lvs []LogicalVolume, name string) (LogicalVolume, bool) {
	for _, lv := range lvs {
		if lv.Name == name {
			return lv, true
		}
	}
	return LogicalVolume{}, false
}

// checkNew: the group exists, the name is free and size fits what is free.
func checkNew(ctx context.Context, m Manager, vg, name string, size uint64) error {
	group, err := FindVolumeGroupOf(ctx, m, vg)
	if err != nil {
		return err
	}
	if _, err := FindVolume(ctx, m, vg, name); err == nil {
		return named(ErrExists, "logical volume %s/%s", vg, name)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	if size > group.Free {
		return named(ErrNoSpace, "volume group %s has %d bytes free, %s/%s needs %d", vg, group.Free, vg, name, size)
	}
	return nil
}

// checkNewThin: the name is free and the pool is a thin pool (so the
// group exists). Thin volumes may overcommit the pool; how far is the
// caller's policy.
func checkNewThin(ctx context.Context, m Manager, vg, name, pool string) error {
	return checkInPool(ctx, m, vg, name, pool, ThinPool, ErrNotFound)
}

// checkSnapshot: the name is free and the origin is a thin volume.
func checkSnapshot(ctx context.Context, m Manager, vg, name, origin string) error {
	return checkInPool(ctx, m, vg, name, origin, Thin, ErrNotThin)
}

// checkInPool reads the group's volumes once: name must be free, and
// base must exist and be of kind (else the error is wrong).
func checkInPool(ctx context.Context, m Manager, vg, name, base string, kind Kind, wrong error) error {
	find, err := lookup(ctx, m, vg)
	if err != nil {
		return err
	}
	if _, taken, err := find(name); err != nil || taken {
		if err == nil {
			err = named(ErrExists, "logical volume %s/%s", vg, name)
		}
		return err
	}
	lv, ok, err := find(base)
	if err != nil {
		return err
	}
	if !ok {
		return named(ErrNotFound, "%s %s/%s", kind, vg, base)
	}
	if lv.Kind != kind {
		return named(wrong, "%s/%s is a %s volume, not a %s", vg, base, lv.Kind, kind)
	}
	return nil
}

// lookup returns a way to find volumes of the group by name: a record
// read per name where the Manager can, one listing of the group otherwise.
func lookup(ctx context.Context, m Manager, vg string) (func(name string) (LogicalVolume, bool, error), error) {
	if f, ok := m.(volumeFinder); ok {
		return func(name string) (LogicalVolume, bool, error) {
			lv, err := f.findVolume(ctx, vg, name)
			if errors.Is(err, ErrNotFound) {
				return LogicalVolume{}, false, nil
			}
			return lv, err == nil, err
		}, nil
	}
	lvs, err := m.LogicalVolumes(ctx, vg)
	if err != nil {
		return nil, err
	}
	return func(name string) (LogicalVolume, bool, error) {
		lv, ok := Named(lvs, name)
		return lv, ok, nil
	}, nil
}

// checkResize says whether the volume must grow; a smaller size is an error.
func checkResize(ctx context.Context, m Manager, vg, name string, size uint64) (bool, error) {
	lv, err := FindVolume(ctx, m, vg, name)
	if err != nil {
		return false, err
	}
	if size < lv.Size {
		return false, named(ErrShrink, "logical volume %s/%s is %d bytes, asked for %d", vg, name, lv.Size, size)
	}
	if size == lv.Size {
		return false, nil
	}
	if lv.Kind == Thick {
		group, err := FindVolumeGroupOf(ctx, m, vg)
		if err != nil {
			return false, err
		}
		if size-lv.Size > group.Free {
			return false, named(ErrNoSpace, "volume group %s has %d bytes free, growing %s/%s needs %d", vg, group.Free, vg, name, size-lv.Size)
		}
	}
	return true, nil
}

func checkGrowth(pool LogicalVolume, size, metadataSize uint64) error {
	if (size > 0 && size < pool.Size) || (metadataSize > 0 && metadataSize < pool.MetadataSize) {
		return named(ErrShrink, "thin pool %s/%s", pool.VolumeGroup, pool.Name)
	}
	return nil
}

func checkRemove(ctx context.Context, m Manager, vg, name string) error {
	lvs, err := m.LogicalVolumes(ctx, vg)
	if err != nil {
		return err
	}
	found := false
	for _, lv := range lvs {
		if lv.Name == name {
			found = true
		}
		if lv.Pool == name {
			return named(ErrInUse, "thin pool %s/%s still holds %s", vg, name, lv.Name)
		}
	}
	if !found {
		return named(ErrNotFound, "logical volume %s/%s", vg, name)
	}
	return nil
}
