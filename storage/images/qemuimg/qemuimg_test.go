package qemuimg_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

const mib = 1 << 20

// images makes a raw disk with data at its start and its end, a hole
// between, and the same disk as qcow2, made by qemu-img.
func images(t *testing.T) (raw, qcow2 string, disk []byte) {
	t.Helper()
	dir := t.TempDir()
	disk = make([]byte, 8*mib)
	_, _ = rand.Read(disk[:mib])
	_, _ = rand.Read(disk[7*mib:])
	raw, qcow2 = filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	for path, data := range map[string][]byte{raw: disk, qcow2: testenv.Qcow2(t, disk)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return raw, qcow2, disk
}

// volume is an empty, zeroed target of size bytes, open as an agent
// opens a volume's disk.
func volume(t *testing.T, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "volume"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

// open opens path as a target, closed when the test ends.
func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestAQcow2BecomesTheRawDisk(t *testing.T) {
	_, qcow2, disk := images(t)
	tool, ctx := qemuimg.New(), context.Background()
	info, err := tool.Inspect(ctx, qcow2, qemuimg.QCOW2)
	if err != nil || info.VirtualSize != int64(len(disk)) {
		t.Fatalf("Inspect = %+v, %v; want a qcow2 of %d bytes", info, err, len(disk))
	}
	dst := volume(t, 16*mib) // larger than the image, as a volume may be
	if err := tool.Convert(ctx, qcow2, info, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst.Name())
	if err != nil || !bytes.Equal(got[:len(disk)], disk) || !bytes.Equal(got[len(disk):], make([]byte, 8*mib)) {
		t.Fatalf("the volume does not hold the raw disk followed by zeros (%v)", err)
	}
	if err := tool.Same(ctx, qcow2, qemuimg.QCOW2, dst); err != nil {
		t.Fatal(err)
	}
}

func TestAConversionThatDiffersIsCaught(t *testing.T) {
	_, qcow2, _ := images(t)
	tool, ctx := qemuimg.New(), context.Background()
	dst := volume(t, 8*mib)
	if err := tool.Convert(ctx, qcow2, qemuimg.Info{Format: qemuimg.QCOW2, VirtualSize: 8 * mib}, dst); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dst.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("bit rot"), 7*mib+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := tool.Same(ctx, qcow2, qemuimg.QCOW2, dst); err == nil || !strings.Contains(err.Error(), "does not hold the image") {
		t.Fatalf("Same = %v; want the difference found", err)
	}
}

func TestAWrongFormatIsRefused(t *testing.T) {
	raw, qcow2, _ := images(t)
	tool, ctx := qemuimg.New(), context.Background()
	for _, c := range []struct{ path, declared, want string }{
		{qcow2, qemuimg.Raw, "declared raw, but its header says qcow2"},
		{raw, qemuimg.QCOW2, "declared qcow2, but it has no qcow2 header"},
		{raw, "vmdk", `format "vmdk"`},
	} {
		if _, err := tool.Inspect(ctx, c.path, c.declared); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Inspect(%s as %s) = %v; want %q", filepath.Base(c.path), c.declared, err, c.want)
		}
	}
}

func TestATooSmallVolumeIsAnError(t *testing.T) {
	_, qcow2, _ := images(t)
	tool, ctx := qemuimg.New(), context.Background()
	info, err := tool.Inspect(ctx, qcow2, qemuimg.QCOW2)
	if err != nil {
		t.Fatal(err)
	}
	dst := volume(t, 4*mib)
	err = tool.Convert(ctx, qcow2, info, dst)
	if err == nil || !strings.Contains(err.Error(), "holds 4194304 bytes, the image") {
		t.Fatalf("an 8 MiB image onto a 4 MiB volume: %v; want it refused", err)
	}
	if got, _ := os.ReadFile(dst.Name()); !bytes.Equal(got, make([]byte, 4*mib)) {
		t.Fatal("the refused conversion wrote into the volume")
	}
}

// A volume that held other bytes reads, after a conversion, as the
// image's disk followed by zeros, whether a file or a block device: the
// hole in the image is written, and the tail past its end is zeroed.
func TestAVolumeThatHeldDataReadsAsTheDiskThenZeros(t *testing.T) {
	testenv.NeedTools(t, "qemu-img")
	_, qcow2, disk := images(t)
	stale := bytes.Repeat([]byte{0xa5}, 16*mib)
	file := filepath.Join(t.TempDir(), "used")
	if err := os.WriteFile(file, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	targets := []string{file}
	if os.Geteuid() == 0 {
		device := testenv.LoopDisk(t, 16*mib)
		if err := os.WriteFile(device, stale, 0o600); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, device)
	}
	tool := qemuimg.New()
	ctx := context.Background()
	for _, target := range targets {
		info, err := tool.Inspect(ctx, qcow2, qemuimg.QCOW2)
		if err != nil {
			t.Fatal(err)
		}
		if err := tool.Convert(ctx, qcow2, info, open(t, target)); err != nil {
			t.Fatal(err)
		}
		if err := tool.Same(ctx, qcow2, qemuimg.QCOW2, open(t, target)); err != nil {
			t.Errorf("%s: %v", target, err)
		}
		f, err := os.Open(target)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 16*mib)
		_, err = f.ReadAt(got, 0)
		f.Close()
		if err != nil || !bytes.Equal(got[:len(disk)], disk) || !bytes.Equal(got[len(disk):], make([]byte, 16*mib-len(disk))) {
			t.Errorf("%s does not read as the disk, then zeros (%v)", target, err)
		}
	}
}

// hostileImages are qcow2 images that reach a host file: one through a
// backing file, one through an external data file, as qemu-img makes
// them.
func hostileImages(t *testing.T) (host string, images map[string]string) {
	t.Helper()
	dir := t.TempDir()
	host = filepath.Join(dir, "host-secret")
	if err := os.WriteFile(host, bytes.Repeat([]byte("host secret "), 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	images = map[string]string{
		"backing file": filepath.Join(dir, "backed.qcow2"),
		"data file":    filepath.Join(dir, "external.qcow2"),
	}
	for _, args := range [][]string{
		{"-b", host, "-F", "raw", images["backing file"]},
		{"-o", "data_file=" + host + ",data_file_raw=on", images["data file"]},
	} {
		if out, err := exec.Command("qemu-img", append(append([]string{"create", "-q", "-f", "qcow2"}, args...), "768K")...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img create: %v: %s", err, out)
		}
	}
	return host, images
}

func TestAnImageReachingAHostFileIsRefused(t *testing.T) {
	host, images := hostileImages(t)
	tool, ctx := qemuimg.New(), context.Background()
	for what, path := range images {
		_, err := tool.Inspect(ctx, path, qemuimg.QCOW2)
		if err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("Inspect of an image with a %s = %v, want it refused naming the %s", what, err, what)
		}
	}
	if _, err := tool.Inspect(ctx, images["backing file"], qemuimg.QCOW2); err == nil || !strings.Contains(err.Error(), host) {
		t.Errorf("the refusal does not name the backing file %s: %v", host, err)
	}
}

// Even past Inspect (a header changed after it, say), conversion and
// comparison never follow a backing file: the volume gets the image's
// own clusters, zeros here, not the host file.
func TestConversionNeverReadsABackingFile(t *testing.T) {
	_, images := hostileImages(t)
	tool, ctx := qemuimg.New(), context.Background()
	dst := volume(t, mib)
	info := qemuimg.Info{Format: qemuimg.QCOW2, VirtualSize: 768 << 10}
	if err := tool.Convert(ctx, images["backing file"], info, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst.Name())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got, []byte("host secret")) {
		t.Fatal("the volume holds the backing file's data")
	}
	if err := tool.Same(ctx, images["backing file"], qemuimg.QCOW2, dst); err != nil {
		t.Fatalf("comparing without the backing file: %v", err)
	}
}

// qemu-img runs confined to the call's image and volume: even past
// Inspect, an image whose external data file is a host file cannot have
// qemu-img read it (the json: source cannot switch a data file off, the
// confinement can).
func TestConversionCannotOpenAHostFile(t *testing.T) {
	_, images := hostileImages(t)
	tool, ctx := qemuimg.New(), context.Background()
	dst := volume(t, mib)
	err := tool.Convert(ctx, images["data file"], qemuimg.Info{Format: qemuimg.QCOW2, VirtualSize: 768 << 10}, dst)
	got, rerr := os.ReadFile(dst.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if bytes.Contains(got, []byte("host secret")) {
		t.Fatalf("the volume holds the host file's data (convert: %v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "ermission denied") {
		t.Fatalf("Convert = %v; want qemu-img refused the data file", err)
	}
}
