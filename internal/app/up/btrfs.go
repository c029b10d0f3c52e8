package up

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/strata-gitops/strata/storage/csi/btrfsbackend"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/nfs"
)

// btrfsTenant is the tenant the example repository's btrfs StorageClass
// uses; its token is kept in the state directory and given to the class
// as the Secret strata-system/btrfs-tenant.
const btrfsTenant = "homelab"

// btrfsHost is this machine as a btrfs storage host.
type btrfsHost struct {
	mount   string
	ganesha *nfs.GaneshaServer
	done    chan error
}

// startBtrfsHost makes this machine the example repository's btrfs
// storage host: a loop-device disk formatted btrfs on first run and
// mounted under the state directory, NFS-Ganesha on o.NFSAddr, and the
// agent's volume API on o.VolumeAPIAddr with one tenant. It returns the
// values the repository substitutes into its btrfs StorageClass. Without
// btrfs-progs or Ganesha it says so and returns none.
func startBtrfsHost(ctx context.Context, c client.Client, o Options, disk string, say func(string, ...any)) (map[string]string, *btrfsHost, error) {
	for _, tool := range []string{"mkfs.btrfs", "ganesha.nfsd"} {
		if _, err := exec.LookPath(tool); err != nil {
			say("btrfs storage host not started: %s is not installed (hack/packages.sh installs it)", tool)
			return nil, nil, nil
		}
	}
	for _, addr := range []string{o.VolumeAPIAddr, o.NFSAddr} {
		if err := checkFree(addr); err != nil {
			return nil, nil, err
		}
	}
	h := &btrfsHost{mount: filepath.Join(o.StateDir, "btrfs"), done: make(chan error, 1)}
	if err := localdisk.MountBtrfs(disk, h.mount); err != nil {
		return nil, nil, fmt.Errorf("btrfs storage host: %w (remove %s to start afresh)", err, filepath.Join(o.StateDir, "disks", "btrfs.img"))
	}
	token, err := btrfsToken(filepath.Join(o.StateDir, "btrfs-token"))
	if err != nil {
		h.stop()
		return nil, nil, err
	}
	if h.ganesha, err = nfs.StartGanesha(ctx, filepath.Join(o.StateDir, "ganesha"), o.NFSAddr); err != nil {
		h.stop()
		return nil, nil, err
	}
	vo := volumeapi.DefaultOptions()
	vo.Base, vo.Listen, vo.Node = h.base(), o.VolumeAPIAddr, NodeName
	vo.GaneshaExports, vo.GaneshaPID = h.ganesha.ExportsFile, h.ganesha.PIDFile
	vo.TenantsEnv, vo.TenantsFile, vo.TenantsSecret = btrfsTenant+":"+token, "", ""
	go func() { h.done <- volumeapi.Run(ctx, nil, vo) }()
	if err := saveTenantSecret(ctx, c, token); err != nil {
		return nil, h, err
	}
	say("btrfs storage host: %s on %s, volume API http://%s (tenant %s), NFS-Ganesha on %s", h.mount, disk, o.VolumeAPIAddr, btrfsTenant, o.NFSAddr)
	host, _, _ := strings.Cut(o.NFSAddr, ":")
	return map[string]string{"btrfs_agent_url": "http://" + o.VolumeAPIAddr, "btrfs_nfs_server": host}, h, nil
}

// stop ends the volume API (its context is the caller's), Ganesha, and
// unmounts the filesystem with the bind mounts under it.
func (h *btrfsHost) stop() {
	if h.ganesha != nil {
		h.ganesha.Stop()
	}
	_ = exec.Command("umount", "--recursive", "--lazy", h.mount).Run()
}

// base is the volume store's directory on the host's btrfs.
func (h *btrfsHost) base() string { return filepath.Join(h.mount, "strata") }

// btrfsToken reads the tenant's token, making one on first run.
func btrfsToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	return token, os.WriteFile(path, []byte(token+"\n"), 0o600)
}

// saveTenantSecret writes the token where the btrfs StorageClass's
// secret parameters point: strata-system/btrfs-tenant.
func saveTenantSecret(ctx context.Context, c client.Client, token string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "strata-system"}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "btrfs-tenant", Namespace: ns.Name},
		StringData: map[string]string{btrfsbackend.TokenKey: token}}
	err := c.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, secret)
	}
	return err
}

// checkFree says whether addr can be listened on, before a server that would
// only report it later is started there.
func checkFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("btrfs storage host: %w (is another strata up running? see --volume-api-address and --nfs-address)", err)
	}
	return l.Close()
}
