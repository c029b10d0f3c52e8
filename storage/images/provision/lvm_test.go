package provision_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/thingroup"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/lvm"
)

// An image fills a logical volume as a raw block device, as
// libvirt-volume-provisioner's jobs do: a thin volume made for the job
// and read back against the image; a job that fails removes only the
// volume it made, and a volume of the group that is not the tenant's
// image volume is refused.
func TestAnImageFillsALogicalVolume(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	vg := fmt.Sprintf("strata-images-%d", os.Getpid())
	m := thingroup.New(t, vg, 3<<30, 2<<30)
	p := w.openOn(t, ctx, t.TempDir(), w.images(), provision.LVMVolumes{LVM: m, Group: vg, Pool: thingroup.Pool})

	j := submit(t, p, request(w.url("vm/disk.qcow2"), "vm-1"))
	if j.Status != provision.Completed || !j.VolumeCreated {
		t.Fatalf("the job: %+v", j)
	}
	dev, err := m.DevicePath(ctx, vg, "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(w.disk))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, w.disk) {
		t.Fatalf("the logical volume does not hold the image's disk (%v)", err)
	}
	if lv, err := lvm.FindVolume(ctx, m, vg, "vm-1"); err != nil || lv.Kind != lvm.Thin || lv.Size != 1<<30 {
		t.Fatalf("the job's volume: %+v, %v; want a 1 GiB thin volume", lv, err)
	}

	failed := submit(t, p, request(w.url("vm/wrong.qcow2"), "vm-2"))
	if failed.Status != provision.Failed {
		t.Fatalf("a job of an image with the wrong checksum: %+v", failed)
	}
	if _, err := lvm.FindVolume(ctx, m, vg, "vm-2"); err == nil {
		t.Error("the failed job left its volume")
	}

	if err := m.CreateVolume(ctx, vg, lvm.VolumeSpec{Name: "database", Size: 1 << 30, Pool: thingroup.Pool}); err != nil {
		t.Fatal(err)
	}
	req := request(w.url("vm/disk.qcow2"), "database")
	req.Overwrite = true
	refused := submit(t, p, req)
	if refused.Status != provision.Failed || !strings.Contains(refused.Error, "is not one of tenant vm's image volumes") {
		t.Fatalf("a job over a volume that is no image volume of the tenant: %+v", refused)
	}
	if _, err := lvm.FindVolume(ctx, m, vg, "database"); err != nil {
		t.Errorf("the refused job removed a volume it did not make: %v", err)
	}
	wantDeletesOnlyTheTenants(t, m, vg)
}

// wantDeletesOnlyTheTenants checks that deleting takes only the
// tenant's own image volume (vm-1 of tenant vm), not another's nor one
// strata did not make (database).
func wantDeletesOnlyTheTenants(t *testing.T, m lvm.Manager, vg string) {
	t.Helper()
	ctx := context.Background()
	volumes := provision.LVMVolumes{LVM: m, Group: vg, Pool: thingroup.Pool}
	for _, c := range []struct{ tenant, name string }{{"vm", "database"}, {"other-tenant", "vm-1"}} {
		if err := volumes.Delete(ctx, c.tenant, c.name); err == nil || !strings.Contains(err.Error(), "is not one of tenant "+c.tenant+"'s image volumes") {
			t.Errorf("deleting %s as tenant %s: %v; want a refusal", c.name, c.tenant, err)
		}
		if _, err := lvm.FindVolume(ctx, m, vg, c.name); err != nil {
			t.Errorf("volume %s is gone after a refused delete: %v", c.name, err)
		}
	}
	if err := volumes.Delete(ctx, "vm", "vm-1"); err != nil {
		t.Errorf("deleting the tenant's own image volume: %v", err)
	}
}
