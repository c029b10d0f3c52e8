package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/testing/agenttls"
	"github.com/strata-gitops/strata/storage/agent/lvmnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/lvm"
)

// The LVM mover's rounds: two volume groups with thin pools on loop
// disks, the loopback volume manager (this machine may lack
// device-mapper), and two pair APIs over TLS. Its floor is a whole copy
// of a snapshot onto the peer's volume with dd, the cheapest mover that
// keeps no delta: it is the floor of the whole sync, and what a mover
// without one pays for every sync.

// lvmAgent is one node: a volume group, its pair store and API.
type lvmAgent struct {
	vg     string
	disk   string
	files  string
	lvm    lvm.Manager
	srv    *httptest.Server
	client *volumeapi.Client
}

func newLVMAgent(dir, name string, size int64) (*lvmAgent, error) {
	dev, err := newLoopDisk(dir, name, 4*size+(1<<30))
	if err != nil {
		return nil, err
	}
	// The volume files live on btrfs, where a snapshot is a reflink copy
	// and costs what a thin snapshot costs, not a whole copy.
	files, err := newLoopDisk(dir, name+"-files", 4*size+(1<<30))
	if err != nil {
		return nil, err
	}
	volumes := filepath.Join(dir, name+"-volumes")
	if err := localdisk.MountBtrfs(files, volumes); err != nil {
		return nil, err
	}
	m, err := lvm.NewLoopback(volumes)
	if err != nil {
		return nil, err
	}
	a := &lvmAgent{vg: "strata-replbench-" + name, disk: dev, files: volumes, lvm: m}
	ctx := context.Background()
	if err := m.CreatePhysicalVolume(ctx, dev); err != nil {
		return nil, err
	}
	if err := m.CreateVolumeGroup(ctx, a.vg, []string{dev}, nil); err != nil {
		return nil, err
	}
	if err := m.CreateThinPool(ctx, a.vg, lvm.ThinPoolSpec{Name: "pool", Size: 3 * uint64(size)}); err != nil {
		return nil, err
	}
	if err := m.CreateVolume(ctx, a.vg, lvm.VolumeSpec{Name: "db", Size: uint64(size), Pool: "pool", Tags: []string{storagev1alpha1.LogicalVolumeTag("db")}}); err != nil {
		return nil, err
	}
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{tenant: token}); err != nil {
		return nil, err
	}
	server := volumeapi.NewPairServer(&lvmnode.Store{LVM: m, Dir: filepath.Join(dir, name+"-pairs")}, tenants)
	served, err := agenttls.Serve(server.Handler())
	if err != nil {
		return nil, err
	}
	a.srv, server.PeerHTTP = served.Srv, served.Client
	a.client = (&volumeapi.Client{URL: a.srv.URL, Token: token, HTTP: served.Client}).WithoutTimeout()
	_, err = a.client.SetPair(ctx, pair, wire.PairRequest{Volume: a.vg + "/db", Token: secret})
	return a, err
}

// newLoopDisk attaches a sparse file of size bytes as a loop device.
func newLoopDisk(dir, name string, size int64) (string, error) {
	img := filepath.Join(dir, name+".img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return "", err
	}
	if err := os.Truncate(img, size); err != nil {
		return "", err
	}
	return loopdev.Attach(img)
}

// remove takes the volume group away with its loop devices.
func (a *lvmAgent) remove() {
	a.srv.Close()
	localdisk.ForgetLVM([]string{a.vg}, a.disk)
	_ = loopdev.DetachUnder(a.files)
	_ = exec.Command("umount", a.files).Run()
}

// write writes size random bytes at off of a volume.
func (a *lvmAgent) write(volume string, off, size int64) error {
	dev, err := a.lvm.DevicePath(context.Background(), a.vg, volume)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return fillRandom(f, off, size)
}

// lvmFloor snapshots a's volume and copies it whole onto b's volume with
// dd, and returns how long that took.
func lvmFloor(a, b *lvmAgent, name string) (time.Duration, error) {
	ctx := context.Background()
	start := time.Now()
	if err := a.lvm.CreateSnapshot(ctx, a.vg, "floor-"+name, "db", nil); err != nil {
		return 0, err
	}
	from, err := a.lvm.DevicePath(ctx, a.vg, "floor-"+name)
	if err != nil {
		return 0, err
	}
	to, err := b.lvm.DevicePath(ctx, b.vg, "db")
	if err != nil {
		return 0, err
	}
	cmd := exec.Command("dd", "if="+from, "of="+to, "bs=4M", "conv=fsync", "status=none")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("dd: %v: %s", err, out)
	}
	return time.Since(start), nil
}

// oneLVMRound is oneRound for the LVM mover.
func oneLVMRound(dir string, c config) (result, error) {
	var r result
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, err
	}
	defer cleanUp(dir)
	a, err := newLVMAgent(dir, "a", c.size)
	if err != nil {
		return r, err
	}
	defer a.remove()
	b, err := newLVMAgent(dir, "b", c.size)
	if err != nil {
		return r, err
	}
	defer b.remove()
	ctx := context.Background()
	if err := a.write("db", 0, c.size); err != nil {
		return r, err
	}
	if r.floorFull, err = lvmFloor(a, b, "full"); err != nil {
		return r, err
	}
	if _, r.strataFull, err = timedSync(ctx, a.client, b.srv.URL); err != nil {
		return r, err
	}
	if err := a.write("db", c.size/4, c.change); err != nil {
		return r, err
	}
	if r.floorDelta, err = lvmFloor(a, b, "delta"); err != nil {
		return r, err
	}
	rep, took, err := timedSync(ctx, a.client, b.srv.URL)
	if err != nil {
		return r, err
	}
	r.strataDelta, r.deltaBytes = took, rep.StreamBytes
	if _, err := b.client.Promote(ctx, pair); err != nil {
		return r, err
	}
	if err := b.write("db", c.size/2, c.change); err != nil {
		return r, err
	}
	if rep, _, err = timedSync(ctx, b.client, a.srv.URL); err != nil {
		return r, err
	}
	r.failbackBytes = rep.StreamBytes
	return r, nil
}
