package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	bin := filepath.Join(RepoRoot(), "bin", "minio")
	if _, err := os.Stat(bin); err != nil {
		Unavailable(t, "the MinIO server bin/minio: run `bash hack/tools.sh minio` (make test does)")
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	m := MinIO{AccessKey: "strata-test", SecretKey: hex.EncodeToString(secret)}
	addr := FreeAddr(t)
	m.Endpoint = "http://" + addr
	cmd := exec.Command(bin, "server", "--quiet", "--address", addr, "--console-address", FreeAddr(t), t.TempDir())
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.AccessKey, "MINIO_ROOT_PASSWORD="+m.SecretKey, "MINIO_BROWSER=off")
	log, err := os.Create(filepath.Join(t.TempDir(), "minio.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
	})
	Eventually(t, 30*time.Second, func() error {
		rsp, err := http.Get(m.Endpoint + "/minio/health/ready")
		if err != nil {
			return err
		}
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			return fmt.Errorf("MinIO at %s is not ready: %s (log %s)", m.Endpoint, rsp.Status, log.Name())
		}
		return nil
	})
	return m
}

// Put makes the bucket and puts each object in it.
func (m MinIO) Put(t testing.TB, bucket string, objects map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	c, err := minio.New(strings.TrimPrefix(m.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, data := range objects {
		if _, err := c.PutObject(ctx, bucket, name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
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
