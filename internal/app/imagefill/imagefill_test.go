package imagefill_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/app/imagefill"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const mib = 1 << 20

// An image fills a directory (as disk.raw), an existing file, and a
// second time from the cache; a bad checksum or a target too small fails
// with why, and writes nothing.
func TestFillWritesTheImagesDiskAndChecksIt(t *testing.T) {
	testenv.NeedTools(t, "qemu-img")
	minio := testenv.StartMinIO(t)
	disk := make([]byte, 4*mib)
	_, _ = rand.Read(disk[:mib])
	objects := testenv.WithChecksums(map[string][]byte{"vm/disk.qcow2": testenv.Qcow2(t, disk)})
	objects["vm/wrong.qcow2"] = objects["vm/disk.qcow2"]
	objects["vm/wrong.qcow2.sha256"] = []byte(strings.Repeat("0", 64))
	minio.Put(t, "images", objects)
	cacheDir := t.TempDir()
	fill := func(object, target string) (string, error) {
		var out bytes.Buffer
		err := imagefill.Fill(context.Background(), imagefill.Options{
			Image:  provision.Image{URL: minio.Endpoint + "/images/" + object, Format: qemuimg.QCOW2},
			Target: target, CacheDir: cacheDir, AccessKey: minio.AccessKey, SecretKey: minio.SecretKey, Endpoints: []string{minio.Endpoint}}, &out)
		return out.String(), err
	}

	dir := t.TempDir()
	out, err := fill("vm/disk.qcow2", dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, imagefill.DiskFile)); err != nil || !bytes.Equal(got, disk) {
		t.Fatalf("the directory's disk.raw is not the image's disk (%v); output:\n%s", err, out)
	}
	for _, stage := range []string{"checking_cache", "downloading", "creating_volume", "converting", "finalizing", "checked"} {
		if !strings.Contains(out, stage) {
			t.Errorf("the output does not show %s:\n%s", stage, out)
		}
	}

	file := filepath.Join(t.TempDir(), "volume.raw")
	if err := os.WriteFile(file, bytes.Repeat([]byte{0xa5}, 8*mib), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = fill("vm/disk.qcow2", file)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(file)
	if !bytes.Equal(got[:len(disk)], disk) || !strings.Contains(out, "found in the cache") {
		t.Fatalf("the second fill, over a file that held other bytes: %d bytes; output:\n%s", len(got), out)
	}

	small := filepath.Join(t.TempDir(), "small.raw")
	if err := os.WriteFile(small, make([]byte, mib), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fill("vm/disk.qcow2", small); err == nil || !strings.Contains(err.Error(), "make the volume at least that large") {
		t.Errorf("a target smaller than the disk: %v", err)
	}
	untouched := filepath.Join(t.TempDir(), "untouched.raw")
	if err := os.WriteFile(untouched, bytes.Repeat([]byte{1}, 8*mib), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fill("vm/wrong.qcow2", untouched); err == nil || !strings.Contains(err.Error(), strings.Repeat("0", 64)) {
		t.Errorf("an image whose checksum does not match: %v; want an error naming the declared digest", err)
	}
	if got, _ := os.ReadFile(untouched); !bytes.Equal(got, bytes.Repeat([]byte{1}, 8*mib)) {
		t.Error("a failed fill wrote into its target")
	}
}
