package lvm

import (
	"context"
	"errors"
)

// The checks every Manager makes before it changes anything, so that both
// implementations fail the same way, with typed errors.

// FindVolume returns one logical volume of the group, or ErrNotFound.
func FindVolume(ctx context.Context, m Manager, vg, name string) (LogicalVolume, error) {
	lvs, err := m.LogicalVolumes(ctx, vg)
	if err != nil {
		return LogicalVolume{}, err
	}
	if lv, ok := Named(lvs, name); ok {
		return lv, nil
	}
	return LogicalVolume{}, named(ErrNotFound, "logical volume %s/%s", vg, name)
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

// checkNewThin: the name is free and the pool is a thin pool. Thin
// volumes may overcommit the pool; how far is the caller's policy.
func checkNewThin(ctx context.Context, m Manager, vg, name, pool string) error {
	if err := checkNew(ctx, m, vg, name, 0); err != nil {
		return err
	}
	lv, err := FindVolume(ctx, m, vg, pool)
	if err != nil {
		return err
	}
	if lv.Kind != ThinPool {
		return named(ErrNotFound, "thin pool %s/%s (it is a %s volume)", vg, pool, lv.Kind)
	}
	return nil
}

func checkSnapshot(ctx context.Context, m Manager, vg, name, origin string) error {
	if err := checkNew(ctx, m, vg, name, 0); err != nil {
		return err
	}
	lv, err := FindVolume(ctx, m, vg, origin)
	if err != nil {
		return err
	}
	if lv.Kind != Thin {
		return named(ErrNotThin, "snapshot origin %s/%s is a %s volume; only thin volumes have snapshots here", vg, origin, lv.Kind)
	}
	return nil
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
