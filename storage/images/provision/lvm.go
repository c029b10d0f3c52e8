package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/storage/lvm"
)

// LVMVolumes are logical volumes of one volume group of the node, each a
// raw disk as a block device, as libvirt-volume-provisioner writes them:
// thin in Pool when it is set, thick otherwise. A volume records its
// tenant in a tag, and another tenant's volume of the same name is
// refused, as is a volume strata did not make for a job.
type LVMVolumes struct {
	LVM   lvm.Manager
	Group string
	Pool  string
}

// imageTenantTag marks a logical volume an image job made, with the
// tenant it belongs to.
const imageTenantTag = "strata.dev/image-tenant="

// Create implements Volumes.
func (l LVMVolumes) Create(ctx context.Context, tenant, name string, size int64) (*os.File, bool, error) {
	lv, err := lvm.FindVolume(ctx, l.LVM, l.Group, name)
	switch {
	case err == nil && !slices.Contains(lv.Tags, imageTenantTag+tenant):
		return nil, false, fmt.Errorf("volume %s/%s exists and is not one of tenant %s's image volumes: name another volume", l.Group, name, tenant)
	case err == nil:
		dev, err := l.openDevice(ctx, name)
		return dev, false, err
	case !errors.Is(err, lvm.ErrNotFound):
		return nil, false, err
	}
	spec := lvm.VolumeSpec{Name: name, Size: roundUp(uint64(size), extent), Pool: l.Pool, Tags: []string{imageTenantTag + tenant}}
	if err := l.LVM.CreateVolume(ctx, l.Group, spec); err != nil {
		return nil, false, fmt.Errorf("volume %s/%s: %w", l.Group, name, err)
	}
	dev, err := l.openDevice(ctx, name)
	return dev, true, err
}

// openDevice opens a logical volume's block device, whose path lvm2
// names (its /dev/<group>/<name> link is lvm2's and root's, not a
// tenant's).
func (l LVMVolumes) openDevice(ctx context.Context, name string) (*os.File, error) {
	path, err := l.LVM.DevicePath(ctx, l.Group, name)
	if err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
}

// Delete implements Volumes: only a volume an image job made for the
// tenant, never another tenant's or one strata did not make.
func (l LVMVolumes) Delete(ctx context.Context, tenant, name string) error {
	lv, err := lvm.FindVolume(ctx, l.LVM, l.Group, name)
	switch {
	case errors.Is(err, lvm.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !slices.Contains(lv.Tags, imageTenantTag+tenant):
		return fmt.Errorf("volume %s/%s is not one of tenant %s's image volumes: it is left as it is", l.Group, name, tenant)
	}
	return l.LVM.RemoveVolume(ctx, l.Group, name)
}

// extent is lvm2's default physical extent: volumes are whole extents.
const extent = 4 << 20

func roundUp(n, unit uint64) uint64 { return (n + unit - 1) / unit * unit }
