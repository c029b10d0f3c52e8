package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/local/objectstore"
	"github.com/strata-gitops/strata/internal/netaddr"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIO is a MinIO server of one test's own: the S3 API at Endpoint,
// with root credentials AccessKey and SecretKey.
type MinIO struct {
	Endpoint             string
	AccessKey, SecretKey string
}

// StartMinIO runs bin/minio (`bash hack/tools.sh minio` builds it) on a
// free loopback port with its data in the test's temporary directory,
// and stops it when the test ends.
func StartMinIO(t testing.TB) MinIO {
	t.Helper()
	return StartMinIOAt(t, "")
}

// RunMinIO runs the MinIO server bin on a free loopback port with its
// data and log in dir, and waits until it is ready; stop ends it.
func RunMinIO(bin, dir string) (m MinIO, stop func(), err error) {
	return RunMinIOAt(bin, dir, "")
}

// StartMinIOAt is StartMinIO on the address host, such as a bridge's,
// where the local cluster's pods reach it.
func StartMinIOAt(t testing.TB, host string) MinIO {
	t.Helper()
	bin := filepath.Join(RepoRoot(), "bin", "minio")
	if _, err := os.Stat(bin); err != nil {
		Unavailable(t, "the MinIO server bin/minio: run `bash hack/tools.sh minio` (make test does)")
	}
	m, stop, err := RunMinIOAt(bin, t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return m
}

// RunMinIOAt is RunMinIO listening on host (empty: loopback), on a port
// free on loopback.
func RunMinIOAt(bin, dir, host string) (m MinIO, stop func(), err error) {
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	m = MinIO{AccessKey: "strata-test", SecretKey: hex.EncodeToString(secret)}
	addr, err := netaddr.Free()
	if err != nil {
		return m, nil, err
	}
	if host != "" {
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(host, port)
	}
	console, err := netaddr.Free()
	if err != nil {
		return m, nil, err
	}
	srv, err := objectstore.Start(context.Background(), bin, dir, addr, console, filepath.Join(dir, "minio.log"), m.AccessKey, m.SecretKey)
	if err != nil {
		return m, nil, err
	}
	m.Endpoint = srv.Endpoint
	return m, srv.Stop, nil
}

// Put makes the bucket and puts each object in it.
func (m MinIO) Put(t testing.TB, bucket string, objects map[string][]byte) {
	t.Helper()
	if err := m.PutObjects(bucket, objects); err != nil {
		t.Fatal(err)
	}
}

// PutObjects makes the bucket and puts each object in it.
func (m MinIO) PutObjects(bucket string, objects map[string][]byte) error {
	ctx := context.Background()
	c, err := minio.New(strings.TrimPrefix(m.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		return err
	}
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		return err
	}
	for name, data := range objects {
		if _, err := c.PutObject(ctx, bucket, name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			return fmt.Errorf("putting %s/%s: %w", bucket, name, err)
		}
	}
	return nil
}

// WithChecksums adds, beside each object, <object>.sha256 holding its
// SHA-256 as sha256sum writes it.
func WithChecksums(objects map[string][]byte) map[string][]byte {
	out := maps.Clone(objects)
	for name, data := range objects {
		sum := sha256.Sum256(data)
		out[name+".sha256"] = []byte(hex.EncodeToString(sum[:]) + "  " + path.Base(name) + "\n")
	}
	return out
}

// Qcow2 is disk as a qcow2 image, made by qemu-img; a machine without
// qemu-img is Unavailable.
func Qcow2(t testing.TB, disk []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		Unavailable(t, "qemu-img (Debian qemu-utils; hack/packages.sh installs it)")
	}
	dir := t.TempDir()
	raw, qcow2 := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(raw, disk, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow2).CombinedOutput(); err != nil {
		t.Fatalf("making a qcow2 image: %v: %s", err, out)
	}
	data, err := os.ReadFile(qcow2)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
