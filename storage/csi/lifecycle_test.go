package csi_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/storage/csi/backend"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/csienv"
	"github.com/strata-gitops/strata/internal/testing/guest"
)

// services are CSI clients of one environment.
type services struct {
	csi.ControllerClient
	csi.NodeClient
	env     *csienv.Env
	dir     string
	mounted [][3]string // volume ID, staging and target path
	// capability is the one every volume is created and mounted with.
	capability *csi.VolumeCapability
}

func connect(t *testing.T, e *csienv.Env) *services {
	t.Helper()
	// Under the environment's directory, which it unmounts when it stops.
	s := &services{env: e, dir: filepath.Join(e.Dir, "mounts")}
	for endpoint, set := range map[string]func(c grpc.ClientConnInterface){
		e.ControllerEndpoint: func(c grpc.ClientConnInterface) { s.ControllerClient = csi.NewControllerClient(c) },
		e.NodeEndpoint:       func(c grpc.ClientConnInterface) { s.NodeClient = csi.NewNodeClient(c) },
	} {
		conn, err := csienv.Dial(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		set(conn)
	}
	t.Cleanup(func() { s.unmountAll(t) }) // runs before the connections close
	return s
}

func mountCapability(fstype string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fstype}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func (s *services) create(t *testing.T, name string, size int64, source *csi.VolumeContentSource) *csi.Volume {
	t.Helper()
	rsp, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{s.capability}, VolumeContentSource: source,
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{
			{Segments: map[string]string{"topology.strata.dev/node": s.env.Node}}}},
	})
	if err != nil {
		t.Fatalf("CreateVolume %s: %v", name, err)
	}
	return rsp.GetVolume()
}

// mount stages and publishes a volume and returns its target path.
func (s *services) mount(t *testing.T, vol *csi.Volume) string {
	t.Helper()
	ctx := context.Background()
	staging := filepath.Join(s.dir, vol.GetVolumeId()+"-staging")
	target := filepath.Join(s.dir, vol.GetVolumeId()+"-target")
	if _, err := s.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(),
		StagingTargetPath: staging, VolumeCapability: s.capability}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	if _, err := s.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.GetVolumeId(),
		StagingTargetPath: staging, TargetPath: target, VolumeCapability: s.capability}); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	s.mounted = append(s.mounted, [3]string{vol.GetVolumeId(), staging, target})
	return target
}

// unmountAll unpublishes and unstages every volume mount mounted.
func (s *services) unmountAll(t *testing.T) {
	ctx := context.Background()
	for _, m := range s.mounted {
		s.unmount(ctx, t, m[0], m[1], m[2])
	}
	s.mounted = nil
}

func (s *services) unmount(ctx context.Context, t *testing.T, id, staging, target string) {
	if _, err := s.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Errorf("NodeUnpublishVolume: %v", err)
	}
	if _, err := s.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Errorf("NodeUnstageVolume: %v", err)
	}
}

func filesystemSize(t *testing.T, path string) int64 {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		t.Fatal(err)
	}
	return int64(fs.Blocks) * fs.Bsize
}

// TestVolumeLifecycle takes one volume per filesystem through everything
// a PVC goes through, and checks the data, not only the answers: what a
// snapshot holds, what a restored volume reads, how big the grown
// filesystem is, and that deleting leaves no object and no volume behind.
func TestVolumeLifecycle(t *testing.T) {
	volumeLifecycle(t, connect(t, startCSI(t, "life")))
}

// TestVolumeLifecycleLVM2 is the same on lvm2's thin volumes on
// device-mapper, the devices every node stages, in the test guest
// (internal/testing/guest), as root with every capability: ext4 and xfs
// grow online there.
func TestVolumeLifecycleLVM2(t *testing.T) {
	if guest.Delegate(t, guest.Options{APIServer: true, MemoryMiB: 3072}) {
		return
	}
	volumeLifecycle(t, connect(t, startCSI(t, "life-lvm2", func(o *csienv.Options) { o.Backend = "lvm2" })))
}

func volumeLifecycle(t *testing.T, s *services) {
	for _, fstype := range []string{"xfs", "ext4"} {
		t.Run(fstype, func(t *testing.T) {
			s.capability = mountCapability(fstype)
			lifecycle(t, s, fstype)
		})
	}
	t.Run("block", func(t *testing.T) { blockVolume(t, s) })
	t.Run("held open", func(t *testing.T) { heldOpen(t, s) })
}

// heldOpen: a staged volume whose filesystem a process still holds open
// is not unstaged. The call fails naming the staging path, the mount and
// what was written stay, and once the file is closed unstaging succeeds.
func heldOpen(t *testing.T, s *services) {
	ctx := context.Background()
	s.capability = mountCapability("ext4")
	vol := s.create(t, "held-pvc", 64<<20, nil)
	s.mount(t, vol)
	last := s.mounted[len(s.mounted)-1]
	id, staging, target := last[0], last[1], last[2]
	f, err := os.Create(filepath.Join(staging, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	_, err = s.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	if err == nil || !strings.Contains(err.Error(), staging) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("NodeUnstageVolume with a file held open = %v; want a refusal naming %s as busy", err, staging)
	}
	if got, err := os.ReadFile(filepath.Join(staging, "open")); err != nil || string(got) != "kept" {
		t.Fatalf("after the refused unstage the staged volume reads %q, %v", got, err)
	}
	f.Close()
	s.unmountAll(t)
	s.deleteAll(t, []string{id}, nil)
}

// blockVolume publishes a raw block volume: the target is the device, and
// what is written through it is on the volume.
func blockVolume(t *testing.T, s *services) {
	s.capability = &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	vol := s.create(t, "block-pvc", 64<<20, nil)
	target := s.mount(t, vol)
	info, err := os.Stat(target)
	if err != nil || info.Mode()&os.ModeDevice == 0 {
		t.Fatalf("block target %s: %v, %v; want a device", target, info, err)
	}
	f, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("raw"), 1<<20); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3)
	if _, err := f.ReadAt(got, 1<<20); err != nil || string(got) != "raw" {
		t.Errorf("read back %q, %v through the block target", got, err)
	}
	stats, err := s.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: vol.GetVolumeId(), VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != 64<<20 {
		t.Errorf("NodeGetVolumeStats of a block volume = %v, %v; want its 64 MiB", stats, err)
	}
	f.Close()
	s.unmountAll(t)
	s.deleteAll(t, []string{vol.GetVolumeId()}, nil)
}

func lifecycle(t *testing.T, s *services, prefix string) {
	ctx := context.Background()
	name := func(n string) string { return prefix + "-" + n }
	vol := s.create(t, name("pvc"), 512<<20, nil)
	target := s.mount(t, vol)
	file := filepath.Join(target, "data")
	if err := os.WriteFile(file, []byte("before the snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}

	snap, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name("snap"), SourceVolumeId: vol.GetVolumeId()})
	if err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if err := os.WriteFile(file, []byte("after the snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	restored := s.create(t, name("restored"), 512<<20, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}})
	if got, err := os.ReadFile(filepath.Join(s.mount(t, restored), "data")); err != nil || string(got) != "before the snapshot" {
		t.Errorf("the volume restored from the snapshot reads %q, %v; want what was written before the snapshot", got, err)
	}
	s.publishReadOnly(t, vol.GetVolumeId())
	s.expand(t, vol.GetVolumeId(), target, prefix)
	s.deleteAcrossKinds(t, snap.GetSnapshot().GetSnapshotId(), vol.GetVolumeId())

	s.unmountAll(t)
	s.deleteAll(t, []string{restored.GetVolumeId(), vol.GetVolumeId(), vol.GetVolumeId()}, []string{snap.GetSnapshot().GetSnapshotId()})
	if _, err := s.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(),
		StagingTargetPath: filepath.Join(s.dir, "gone"), VolumeCapability: s.capability}); status.Code(err) != codes.NotFound {
		t.Errorf("NodeStageVolume of a deleted volume: %v, want NotFound", err)
	}
}

// publishReadOnly publishes a staged volume read-only at a second target
// and checks that it reads but does not write there.
func (s *services) publishReadOnly(t *testing.T, id string) {
	t.Helper()
	staging, target := filepath.Join(s.dir, id+"-staging"), filepath.Join(s.dir, id+"-readonly")
	if _, err := s.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: s.capability, Readonly: true}); err != nil {
		t.Fatalf("NodePublishVolume read-only: %v", err)
	}
	s.mounted = append(s.mounted, [3]string{id, staging, target})
	if _, err := os.ReadFile(filepath.Join(target, "data")); err != nil {
		t.Errorf("reading through the read-only target: %v", err)
	}
	if err := os.WriteFile(filepath.Join(target, "other"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("writing through the read-only target: %v, want EROFS", err)
	}
}

// expand grows a mounted volume from 512 MiB to 1 GiB and checks its
// filesystem grew.
func (s *services) expand(t *testing.T, id, target, fstype string) {
	t.Helper()
	ctx := context.Background()
	before := filesystemSize(t, target)
	grown, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}, VolumeCapability: s.capability})
	if err != nil || grown.GetCapacityBytes() != 1<<30 || !grown.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume = %v, %v; want 1 GiB and node expansion", grown, err)
	}
	_, err = s.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target,
		VolumeCapability: s.capability})
	switch {
	case err != nil && fstype == "ext4" && !hasCapability(t, capSysResource):
		// This machine's sandbox withholds CAP_SYS_RESOURCE, without which
		// the kernel refuses to grow a mounted ext4; the error must say so.
		if !strings.Contains(err.Error(), "CAP_SYS_RESOURCE") {
			t.Errorf("NodeExpandVolume without CAP_SYS_RESOURCE: %v; want the error to name the capability", err)
		}
	case err != nil:
		t.Fatalf("NodeExpandVolume: %v", err)
	default:
		if after := filesystemSize(t, target); after < before*3/2 {
			t.Errorf("the filesystem is %d bytes after growing the volume from 512 MiB to 1 GiB (was %d)", after, before)
		}
	}
	stats, err := s.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != filesystemSize(t, target) {
		t.Errorf("NodeGetVolumeStats = %v, %v; want the filesystem's %d bytes", stats, err, filesystemSize(t, target))
	}
}

// deleteAcrossKinds checks that a snapshot's ID names no volume, and a
// volume's no snapshot.
func (s *services) deleteAcrossKinds(t *testing.T, snapshot, volume string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: snapshot}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: volume}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{snapshot, volume} {
		if err := s.env.Client.Get(ctx, client.ObjectKey{Name: objectOf(t, id)}, &storagev1alpha1.LogicalVolume{}); err != nil {
			t.Fatalf("a delete through the other kind's call removed %s: %v", id, err)
		}
	}
}

// deleteAll deletes volumes and a snapshot and checks that their objects
// and volume files are gone.
func (s *services) deleteAll(t *testing.T, volumes, snapshots []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range volumes {
		if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Errorf("DeleteVolume %s: %v", id, err)
		}
	}
	for _, id := range snapshots {
		if _, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id}); err != nil {
			t.Errorf("DeleteSnapshot %s: %v", id, err)
		}
	}
	for _, id := range append(slices.Clone(volumes), snapshots...) {
		err := s.env.Client.Get(ctx, client.ObjectKey{Name: objectOf(t, id)}, &storagev1alpha1.LogicalVolume{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("LogicalVolume of %s after its delete returned: %v, want not found", id, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(s.env.Dir, "loopback", s.env.Class, "*.img")); len(left) > 0 {
		t.Errorf("volume files left after every volume and snapshot was deleted: %v", left)
	}
	if guest.InGuest() {
		out, err := exec.Command("lvs", "--noheadings", "-o", "lv_name,lv_tags").CombinedOutput()
		if err != nil {
			t.Fatalf("lvs: %v: %s", err, out)
		}
		for _, id := range append(slices.Clone(volumes), snapshots...) {
			if tag := storagev1alpha1.LogicalVolumeTag(objectOf(t, id)); strings.Contains(string(out), tag) {
				t.Errorf("a logical volume tagged %s is left after its delete returned:\n%s", tag, out)
			}
		}
	}
}

func objectOf(t *testing.T, id string) string {
	parsed, err := backend.ParseVolumeID(id)
	if err != nil {
		t.Fatal(err)
	}
	return parsed.Name
}

const capSysResource = 24

// hasCapability reads the test process's effective capabilities.
func hasCapability(t *testing.T, bit uint) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<bit) != 0
		}
	}
	return false
}
