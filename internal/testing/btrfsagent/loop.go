package btrfsagent

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/testing/agenttls"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
)

// Node is one node for the benchmarks: a btrfs of its own on a sparse
// loop file, its store, and the volume API served over TLS.
type Node struct {
	Mnt    string
	Store  *btrfsnode.Store
	Srv    *httptest.Server
	Client *volumeapi.Client
}

// OnLoop makes node name under dir: a sparse loop file of size bytes
// formatted btrfs and mounted, its store, and the volume API serving
// tenant with token. CleanUp(dir) undoes every node under dir.
func OnLoop(dir, name string, size int64, tenant, token string) (*Node, error) {
	img := filepath.Join(dir, name+".img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return nil, err
	}
	if err := os.Truncate(img, size); err != nil {
		return nil, err
	}
	dev, err := loopdev.Attach(img)
	if err != nil {
		return nil, err
	}
	n := &Node{Mnt: filepath.Join(dir, name)}
	if err := localdisk.MountBtrfs(dev, n.Mnt); err != nil {
		return nil, err
	}
	if n.Store, err = btrfsnode.Open(context.Background(), filepath.Join(n.Mnt, "strata"), nil, name); err != nil {
		return nil, err
	}
	tenants := &volumeapi.Tenants{}
	if err := tenants.Set(map[string]string{tenant: token}); err != nil {
		return nil, err
	}
	server := volumeapi.New(n.Store, tenants)
	served, err := agenttls.Serve(server.Handler())
	if err != nil {
		return nil, err
	}
	n.Srv, server.PeerHTTP = served.Srv, served.Client
	n.Client = (&volumeapi.Client{URL: n.Srv.URL, Token: token, HTTP: served.Client}).WithoutTimeout()
	return n, nil
}

// CleanUp unmounts every node's filesystem under dir, detaches their
// loop devices and removes dir.
func CleanUp(dir string) {
	mounts, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, m := range mounts {
		if info, err := os.Stat(m); err == nil && info.IsDir() {
			_ = exec.Command("umount", "--recursive", m).Run()
		}
	}
	_ = loopdev.DetachUnder(dir)
	_ = os.RemoveAll(dir)
}
