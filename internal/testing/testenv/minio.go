package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
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
