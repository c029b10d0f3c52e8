package nodeapi_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	storagev1alpha1 "github.com/strata-gitops/strata/api/storage/v1alpha1"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/nodeapi"
	"github.com/strata-gitops/strata/storage/lvm"
)

const managed = "strata.dev/managed"

// TestVolumeOverTheSocket asks a served API for volumes found both ways:
// located from their LogicalVolume, and by searching the managed groups
// when no location is known. A volume in an unmanaged group, or of
// another LogicalVolume, is not found.
func TestVolumeOverTheSocket(t *testing.T) {
	ctx := context.Background()
	m := volumes(t)
	var mu sync.Mutex // Locate runs on the server's goroutines
	located := map[string]bool{}
	server := &nodeapi.Server{LVM: m, ManagedTag: managed, Locate: func(_ context.Context, name string) (string, string, bool) {
		mu.Lock()
		defer mu.Unlock()
		located[name] = true
		return "nodeapi-managed", "v", name == "nodeapi-managed-lv" || name == "located"
	}}
	c := serve(t, server)

	want, err := m.DevicePath(ctx, "nodeapi-managed", "v")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Volume(ctx, "nodeapi-managed-lv") // located
	if err != nil || got.Device != want || got.VolumeGroup != "nodeapi-managed" || got.Size != 8<<20 {
		t.Errorf("Volume(nodeapi-managed-lv) = %+v, %v; want %s in nodeapi-managed, 8 MiB", got, err, want)
	}
	got, err = c.Volume(ctx, "searched") // Locate has no answer
	if err != nil || got.Name != "w" || got.Size != 4<<20 {
		t.Errorf("Volume(searched) = %+v, %v; want volume w of 4 MiB", got, err)
	}
	// Located where a volume is, but not tagged for this LogicalVolume:
	// the search does not find it either.
	if _, err := c.Volume(ctx, "located"); status.Code(err) != codes.NotFound {
		t.Errorf("Volume(located) of a volume tagged for another LogicalVolume: %v, want NotFound", err)
	}
	if _, err := c.Volume(ctx, "nodeapi-foreign-lv"); status.Code(err) != codes.NotFound {
		t.Errorf("Volume of a volume in an unmanaged group: %v, want NotFound", err)
	}
	if _, err := c.Volume(ctx, ""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Volume without a name: %v, want InvalidArgument", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !located["nodeapi-managed-lv"] || !located["searched"] {
		t.Errorf("the server did not ask Locate first: asked for %v", located)
	}
}

// volumes is a loopback manager with two groups, one managed, each with a
// volume v tagged for LogicalVolume <group>-lv, and a volume w in the
// managed group tagged for LogicalVolume "searched".
func volumes(t *testing.T) *lvm.Loopback {
	testenv.NeedRoot(t, "loop devices")
	testenv.NeedTools(t, "lvm", "losetup")
	ctx := context.Background()
	m, err := lvm.NewLoopback(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DetachLoopDevicesUnder(t, m.Dir) })
	group := func(vg string, tags []string) {
		disk := testenv.LoopDisk(t, 64<<20)
		t.Cleanup(func() { testenv.RemoveVolumeGroup([]string{vg}, disk) })
		if err := m.CreatePhysicalVolume(ctx, disk); err != nil {
			t.Fatal(err)
		}
		if err := m.CreateVolumeGroup(ctx, vg, []string{disk}, tags); err != nil {
			t.Fatal(err)
		}
		if err := m.CreateVolume(ctx, vg, lvm.VolumeSpec{Name: "v", Size: 8 << 20,
			Tags: []string{storagev1alpha1.LogicalVolumeTag(vg + "-lv")}}); err != nil {
			t.Fatal(err)
		}
	}
	group("nodeapi-managed", []string{managed})
	group("nodeapi-foreign", nil)
	if err := m.CreateVolume(ctx, "nodeapi-managed", lvm.VolumeSpec{Name: "w", Size: 4 << 20,
		Tags: []string{storagev1alpha1.LogicalVolumeTag("searched")}}); err != nil {
		t.Fatal(err)
	}

	return m
}

// serve serves the API on a socket until the test ends.
func serve(t *testing.T, server *nodeapi.Server) *nodeapi.Client {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- nodeapi.Serve(ctx, socket, server) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	// A call before the server listens fails fast, as it should for a
	// node whose agent is down; here the server is on its way.
	testenv.Eventually(t, 10*time.Second, func() error {
		_, err := os.Stat(socket)
		return err
	})
	c, err := nodeapi.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
