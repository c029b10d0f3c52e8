package provision_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/images/provision"
	"golang.org/x/sys/unix"
)

// A tenant writes into its own volume (over NFS, or from a pod), so it
// can put disk.raw there as a link to a host file, or as a FIFO, and then
// ask for an image job with overwrite. The root agent must write neither
// the host file nor hang on the FIFO: the job fails naming disk.raw, and
// the host file keeps its bytes and size.
func TestAnImageJobNeverWritesThroughATenantsLink(t *testing.T) {
	w := newWorld(t)
	p := w.open(t, context.Background(), t.TempDir(), w.images())
	host := filepath.Join(t.TempDir(), "shadow")
	secret := []byte("root:$6$not-for-a-tenant:19000:0:99999:7:::\n")
	if err := os.WriteFile(host, secret, 0o640); err != nil {
		t.Fatal(err)
	}
	plant := map[string]func(disk string) error{
		"symbolic link":      func(disk string) error { return os.Symlink(host, disk) },
		"not a regular file": func(disk string) error { return unix.Mkfifo(disk, 0o600) },
		"hard links": func(disk string) error {
			if err := os.WriteFile(disk+".mine", nil, 0o600); err != nil {
				return err
			}
			return os.Link(disk+".mine", disk)
		},
	}
	for what, planted := range plant {
		t.Run(what, func(t *testing.T) {
			name := "vm-" + strings.ReplaceAll(what, " ", "-")
			v, _, err := w.store.Create(context.Background(), tenant, btrfsnode.CreateRequest{Name: name, SizeBytes: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			disk := filepath.Join(v.Path, provision.DiskFile)
			if err := planted(disk); err != nil {
				t.Fatal(err)
			}
			req := request(w.url("vm/disk.qcow2"), name)
			req.Overwrite = true
			j := submit(t, p, req)
			if j.Status != provision.Failed || !strings.Contains(j.Error, provision.DiskFile+" in the volume") || !strings.Contains(j.Error, what) {
				t.Fatalf("a job onto a volume whose disk is a %s: %+v; want it failed naming %s", what, j, provision.DiskFile)
			}
			if strings.Contains(j.Error, host) || strings.Contains(j.Error, v.Path) {
				t.Errorf("the tenant reads a host path: %s", j.Error)
			}
			if data, err := os.ReadFile(host); err != nil || !bytes.Equal(data, secret) {
				t.Fatalf("the host file was written through the tenant's %s: %q, %v", what, data, err)
			}
			if st, err := os.Lstat(disk); err != nil || st.Size() > int64(len(secret)) && st.Mode().IsRegular() {
				t.Fatalf("the volume's %s was changed: %v, %v", provision.DiskFile, st, err)
			}
		})
	}
}
