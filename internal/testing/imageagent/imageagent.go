// Package imageagent starts a node's volume API with image jobs for the
// tests of what drives them: a real MinIO server holding a qcow2 image
// and its checksum, a btrfs store on a loop disk, a cache and the jobs.
package imageagent

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// Agent is the started API and what it serves.
type Agent struct {
	Srv *httptest.Server
	// Image is the URL of the qcow2 image in the bucket.
	Image string
	// Disk is the raw disk the image holds.
	Disk  []byte
	Store *btrfsnode.Store
}

// Start serves the volume API with image jobs for the tenants, by token.
func Start(t *testing.T, tenants map[string]string) Agent {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on a loop device")
	m := testenv.StartMinIO(t)
	a := Agent{Disk: make([]byte, 4<<20)}
	_, _ = rand.Read(a.Disk[:1<<20])
	m.Put(t, "images", testenv.WithChecksums(map[string][]byte{"vm/disk.qcow2": testenv.Qcow2(t, a.Disk)}))
	a.Image = m.Endpoint + "/images/vm/disk.qcow2"
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	var err error
	if a.Store, err = btrfsnode.Open(ctx, filepath.Join(testenv.BtrfsDisk(t, 2<<30), "strata"), nil, "node-a"); err != nil {
		t.Fatal(err)
	}
	images, err := cache.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := provision.Open(ctx, provision.Options{Dir: t.TempDir(), Cache: images, Tool: qemuimg.New(),
		Images: provision.BucketImages{AccessKey: m.AccessKey, SecretKey: m.SecretKey, Endpoints: []string{m.Endpoint}}, Volumes: provision.BtrfsVolumes{Store: a.Store}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Wait)
	known := &volumeapi.Tenants{}
	if err := known.Set(tenants); err != nil {
		t.Fatal(err)
	}
	server := volumeapi.New(a.Store, known)
	server.Images = p
	a.Srv = httptest.NewServer(server.Handler())
	t.Cleanup(a.Srv.Close)
	return a
}
