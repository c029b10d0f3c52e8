package provision_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

const (
	mib    = 1 << 20
	tenant = "vm"
)

// world is a MinIO server with a bucket of images, a node's btrfs volume
// store on a loop disk, and an image cache.
type world struct {
	minio   testenv.MinIO
	store   *btrfsnode.Store
	cache   *cache.Cache
	disk    []byte // the raw disk the qcow2 image holds
	objects map[string][]byte
	// notices are what the Provisioners told, "reason: message".
	notices notices
}

type notices struct {
	mu   sync.Mutex
	seen []string
}

func (n *notices) add(reason, message string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, reason+": "+message)
}

func (n *notices) of(job string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, s := range n.seen {
		if strings.Contains(s, "image job "+job+" ") {
			out = append(out, s)
		}
	}
	return out
}

func newWorld(t *testing.T) *world {
	t.Helper()
	testenv.NeedRoot(t, "btrfs on loop devices")
	w := &world{minio: testenv.StartMinIO(t)}
	var err error
	if w.store, err = btrfsnode.Open(context.Background(), filepath.Join(testenv.BtrfsDisk(t, 4<<30), "strata"), nil, "node-a"); err != nil {
		t.Fatal(err)
	}
	if w.cache, err = cache.Open(t.TempDir(), 0); err != nil {
		t.Fatal(err)
	}
	w.disk = make([]byte, 8*mib)
	_, _ = rand.Read(w.disk[:mib])
	_, _ = rand.Read(w.disk[7*mib:])
	big := filepath.Join(t.TempDir(), "big.qcow2") // a 2 GiB disk, nothing written
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", big, "2G").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	bigImage, err := os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	w.objects = testenv.WithChecksums(map[string][]byte{"vm/disk.qcow2": testenv.Qcow2(t, w.disk), "vm/big.qcow2": bigImage})
	broken := append([]byte("QFI\xfb\x00\x00\x00\x03"), make([]byte, 4096)...) // a qcow2 header qemu-img cannot open
	for name, data := range testenv.WithChecksums(map[string][]byte{"vm/broken.qcow2": broken}) {
		w.objects[name] = data
	}
	w.objects["vm/wrong.qcow2"] = w.objects["vm/disk.qcow2"]
	w.objects["vm/wrong.qcow2.sha256"] = w.objects["vm/big.qcow2.sha256"]
	w.minio.Put(t, "images", w.objects)
	return w
}

func (w *world) url(object string) string { return w.minio.Endpoint + "/images/" + object }

func (w *world) images() provision.BucketImages {
	return provision.BucketImages{AccessKey: w.minio.AccessKey, SecretKey: w.minio.SecretKey, Endpoints: []string{w.minio.Endpoint}}
}

// open starts a Provisioner over the world, its records in dir, until
// ctx ends.
func (w *world) open(t *testing.T, ctx context.Context, dir string, images provision.Images) *provision.Provisioner {
	t.Helper()
	return w.openOn(t, ctx, dir, images, provision.BtrfsVolumes{Store: w.store})
}

// openOn is open with the volumes jobs fill.
func (w *world) openOn(t *testing.T, ctx context.Context, dir string, images provision.Images, volumes provision.Volumes) *provision.Provisioner {
	t.Helper()
	p, err := provision.Open(ctx, provision.Options{Dir: dir, Cache: w.cache, Images: images, Volumes: volumes, Tool: qemuimg.New(),
		Notice: w.notices.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Wait)
	return p
}

func request(url, volume string) provision.Request {
	return provision.Request{ImageURL: url, VolumeName: volume, VolumeSizeGB: 1, ImageType: qemuimg.QCOW2}
}

// waitFor polls the job until check passes, and returns it.
func waitFor(t *testing.T, p *provision.Provisioner, id string, check func(provision.Job) error) provision.Job {
	t.Helper()
	var j provision.Job
	testenv.Eventually(t, time.Minute, func() error {
		var err error
		if j, err = p.Get(tenant, id); err != nil {
			return err
		}
		return check(j)
	})
	return j
}

func ended(j provision.Job) error {
	if j.Status == provision.Pending || j.Status == provision.Running {
		return fmt.Errorf("job %s is %s (%+v)", j.ID, j.Status, j.Progress)
	}
	return nil
}

func submit(t *testing.T, p *provision.Provisioner, req provision.Request) provision.Job {
	t.Helper()
	j, _, err := p.Submit(tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	return waitFor(t, p, j.ID, ended)
}

// diskOf reads the raw disk of a volume.
func (w *world) diskOf(t *testing.T, volume string) []byte {
	t.Helper()
	v, err := w.store.Get(tenant, volume)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(v.Path, provision.DiskFile))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (w *world) volumeExists(volume string) bool {
	_, err := w.store.Get(tenant, volume)
	return err == nil
}

func TestAQcow2FillsANewVolumeAndTheNextJobHitsTheCache(t *testing.T) {
	w := newWorld(t)
	p := w.open(t, context.Background(), t.TempDir(), w.images())
	j := submit(t, p, request(w.url("vm/disk.qcow2"), "vm-1"))
	object := int64(len(w.objects["vm/disk.qcow2"]))
	if j.Status != provision.Completed || j.CacheHit || j.Progress.Percent != 100 || j.Progress.Stage != provision.Finalizing ||
		j.Progress.BytesProcessed != object || j.Progress.BytesTotal != object || !j.VolumeCreated || j.CompletedAt == nil {
		t.Fatalf("the first job: %+v", j)
	}
	got := w.diskOf(t, "vm-1")
	if len(got) != 1<<30 || !bytes.Equal(got[:len(w.disk)], w.disk) {
		t.Fatalf("the volume's raw disk is %d bytes, or does not start with the image's disk", len(got))
	}
	steps := w.notices.of(j.ID)
	if len(steps) != 7 || !strings.HasPrefix(steps[0], "ImageJobStarted: image job "+j.ID+" of tenant vm ("+w.url("vm/disk.qcow2")+" into volume vm-1)") ||
		!strings.HasPrefix(steps[2], "ImageJobProgress: ") || !strings.HasSuffix(steps[2], ": downloading") || !strings.HasPrefix(steps[6], "ImageJobCompleted: ") {
		t.Errorf("the job's notices: %q; want its start, its five stages and its end", steps)
	}
	again := submit(t, p, request(w.url("vm/disk.qcow2"), "vm-2"))
	if again.Status != provision.Completed || !again.CacheHit {
		t.Fatalf("the second job of the same image: %+v; want a cache hit", again)
	}
}

func TestFailedJobsLeaveNothing(t *testing.T) {
	w := newWorld(t)
	p := w.open(t, context.Background(), t.TempDir(), w.images())
	for _, c := range []struct {
		name string
		req  provision.Request
		want string
	}{
		{"a checksum mismatch", request(w.url("vm/wrong.qcow2"), "vm-wrong"), "but its source declares"},
		{"a volume too small", request(w.url("vm/big.qcow2"), "vm-small"), "ask for a volume of at least 2 GiB"},
		{"a wrongly declared format", provision.Request{ImageURL: w.url("vm/disk.qcow2"), VolumeName: "vm-format", VolumeSizeGB: 1, ImageType: qemuimg.Raw},
			"declared raw, but its header says qcow2"},
		{"a missing image", request(w.url("vm/none.qcow2"), "vm-none"), "vm/none.qcow2.sha256 is missing"},
		// qemu-img's error names the cache's file: the tenant reads it
		// without the host's path, the node's events with it.
		{"an image qemu-img cannot open", request(w.url("vm/broken.qcow2"), "vm-broken"), "<host path>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := submit(t, p, c.req)
			if j.Status != provision.Failed || !strings.Contains(j.Error, c.want) {
				t.Fatalf("job: %s %q; want failed with %q", j.Status, j.Error, c.want)
			}
			if w.volumeExists(c.req.VolumeName) || j.VolumeCreated {
				t.Fatalf("the failed job left volume %s", c.req.VolumeName)
			}
			t.Logf("the job's error: %s", j.Error)
			if strings.Contains(j.Error, "/var/") || strings.Contains(j.Error, os.TempDir()+"/") {
				t.Fatalf("the tenant reads a host path in the job's error: %q", j.Error)
			}
			steps := w.notices.of(j.ID)
			if c.want == "<host path>" {
				c.want = "sha256-" // the node's notice names the cache's file
			}
			if len(steps) == 0 || !strings.HasPrefix(steps[len(steps)-1], "ImageJobFailed: ") || !strings.Contains(steps[len(steps)-1], c.want) {
				t.Errorf("the failed job's notices end %q; want ImageJobFailed with %q", steps, c.want)
			}
		})
	}
}

func TestAVolumeThatExistsIsNeitherWrittenNorDeleted(t *testing.T) {
	w := newWorld(t)
	p := w.open(t, context.Background(), t.TempDir(), w.images())
	v, _, err := w.store.Create(context.Background(), tenant, btrfsnode.CreateRequest{Name: "vm-kept", SizeBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(v.Path, "kept.txt")
	if err := os.WriteFile(kept, []byte("someone's data"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := submit(t, p, request(w.url("vm/disk.qcow2"), "vm-kept"))
	if j.Status != provision.Failed || !strings.Contains(j.Error, "exists already") || j.VolumeCreated {
		t.Fatalf("a job onto an existing volume: %+v; want it refused", j)
	}
	if data, err := os.ReadFile(kept); err != nil || string(data) != "someone's data" {
		t.Fatalf("the refused job touched the volume: %q, %v", data, err)
	}
	req := request(w.url("vm/disk.qcow2"), "vm-kept")
	req.Overwrite = true
	if j := submit(t, p, req); j.Status != provision.Completed || j.VolumeCreated {
		t.Fatalf("a job with overwrite: %+v; want it completed on the volume it did not make", j)
	}
	if got := w.diskOf(t, "vm-kept"); !bytes.Equal(got[:len(w.disk)], w.disk) {
		t.Fatal("the overwrite did not fill the volume")
	}
}

// gated holds every image download until its gate closes.
type gated struct {
	provision.BucketImages
	gate chan struct{}
}

func (g gated) Copy(ctx context.Context, imageURL string, w io.Writer) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.BucketImages.Copy(ctx, imageURL, w)
}

func downloading(j provision.Job) error {
	if j.Progress.Stage != provision.Downloading {
		return fmt.Errorf("job %s is at %q", j.ID, j.Progress.Stage)
	}
	return nil
}

func TestACancelStopsAConversionAndAWaitingJob(t *testing.T) {
	w := newWorld(t)
	url, _ := w.slowImage(t)
	p, err := provision.Open(context.Background(), provision.Options{Dir: t.TempDir(), Cache: w.cache, Images: w.images(),
		Volumes: provision.BtrfsVolumes{Store: w.store}, Tool: qemuimg.New(), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Wait)
	converting, _, err := p.Submit(tenant, request(url, "vm-converting"))
	if err != nil {
		t.Fatal(err)
	}
	waiting, _, err := p.Submit(tenant, request(url, "vm-waiting")) // no slot: one job at a time
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, converting.ID, func(j provision.Job) error {
		if j.Progress.Stage != provision.Converting {
			return fmt.Errorf("job %s is at %q", j.ID, j.Progress.Stage)
		}
		return nil
	})
	for _, j := range []provision.Job{waiting, converting} {
		if got, _ := p.Get(tenant, j.ID); j.ID == waiting.ID && got.Status != provision.Pending {
			t.Fatalf("the second job is %s while the only slot is taken; want pending", got.Status)
		}
		asked := time.Now()
		if _, err := p.Cancel(tenant, j.ID); err != nil {
			t.Fatal(err)
		}
		done := waitFor(t, p, j.ID, ended)
		if done.Status != provision.Cancelled || time.Since(asked) > time.Second || w.volumeExists(j.Request.VolumeName) {
			t.Fatalf("job %s after a cancel: %s after %s, volume left %v; want cancelled within a second, nothing left",
				j.Request.VolumeName, done.Status, time.Since(asked), w.volumeExists(j.Request.VolumeName))
		}
	}
}

func TestACancelStopsAJobWithinASecond(t *testing.T) {
	w := newWorld(t)
	p := w.open(t, context.Background(), t.TempDir(), gated{w.images(), make(chan struct{})})
	j, _, err := p.Submit(tenant, request(w.url("vm/disk.qcow2"), "vm-cancelled"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, j.ID, downloading)
	asked := time.Now()
	if _, err := p.Cancel(tenant, j.ID); err != nil {
		t.Fatal(err)
	}
	j = waitFor(t, p, j.ID, ended)
	if j.Status != provision.Cancelled || time.Since(asked) > time.Second || w.volumeExists("vm-cancelled") || w.cache.Size() != 0 {
		t.Fatalf("after a cancel: %s after %s, volume %v, cache %d bytes; want cancelled within a second, nothing left",
			j.Status, time.Since(asked), w.volumeExists("vm-cancelled"), w.cache.Size())
	}
	if _, err := p.Cancel(tenant, j.ID); err == nil {
		t.Fatal("a cancel of an ended job was taken")
	}
}

func TestARestartResumesInterruptedJobs(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	// A stop while a job downloads: its record stays running.
	ctx, stop := context.WithCancel(context.Background())
	first := w.open(t, ctx, dir, gated{w.images(), make(chan struct{})})
	j, _, err := first.Submit(tenant, request(w.url("vm/disk.qcow2"), "vm-resumed"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, first, j.ID, downloading)
	stop()
	first.Wait()
	// A crash after a job made its volume and before it filled it.
	made, _, err := w.store.Create(context.Background(), tenant, btrfsnode.CreateRequest{Name: "vm-half", SizeBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(made.Path, provision.DiskFile), []byte("half written"), 0o600); err != nil {
		t.Fatal(err)
	}
	half := provision.Job{ID: "0123456789abcdef", Tenant: tenant, Request: request(w.url("vm/disk.qcow2"), "vm-half"), Status: provision.Running,
		CreatedAt: time.Now().UTC(), VolumeCreated: true, Progress: provision.Progress{Stage: provision.Converting}}
	data, _ := json.Marshal(half)
	if err := os.WriteFile(filepath.Join(dir, half.ID+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}

	again := w.open(t, context.Background(), dir, w.images())
	for _, id := range []string{j.ID, half.ID} {
		done := waitFor(t, again, id, ended)
		if done.Status != provision.Completed || done.Resumed != 1 || !done.VolumeCreated {
			t.Fatalf("job %s after the restart: %+v; want it resumed and completed on the volume it made", id, done)
		}
		if got := w.diskOf(t, done.Request.VolumeName); !bytes.Equal(got[:len(w.disk)], w.disk) {
			t.Fatalf("job %s's volume does not hold the image", id)
		}
	}
}

func TestARepeatedRequestReturnsItsFirstJob(t *testing.T) {
	w := newWorld(t)
	p := w.open(t, context.Background(), t.TempDir(), w.images())
	req := request(w.url("vm/disk.qcow2"), "vm-once")
	req.IdempotencyKey = "install-vm-once"
	first, existing, err := p.Submit(tenant, req)
	if err != nil || existing {
		t.Fatal(existing, err)
	}
	second, existing, err := p.Submit(tenant, req)
	if err != nil || !existing || second.ID != first.ID {
		t.Fatalf("the repeated request got job %s (existing %v, %v); want %s", second.ID, existing, err, first.ID)
	}
	waitFor(t, p, first.ID, ended)
	if jobs := p.List(tenant); len(jobs) != 1 {
		t.Fatalf("%d jobs listed; want the one", len(jobs))
	}
	for _, bad := range []provision.Request{{}, {ImageURL: "x", VolumeName: "v", VolumeSizeGB: 1, ImageType: "vmdk"}, {ImageURL: "x", VolumeName: "v", ImageType: "raw"}} {
		if _, _, err := p.Submit(tenant, bad); err == nil {
			t.Errorf("Submit(%+v) took it", bad)
		}
	}
}

// Ended jobs are kept for the retention, then their records go; and a
// tenant's unfinished jobs are bounded, so that jobs fill neither the
// agent's memory nor its disk.
func TestJobsArePrunedAndBounded(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	h := held{BucketImages: w.images(), BtrfsVolumes: provision.BtrfsVolumes{Store: w.store}, stage: provision.CheckingCache}
	p, err := provision.Open(context.Background(), provision.Options{Dir: dir, Cache: w.cache, Images: h, Volumes: h,
		Tool: qemuimg.New(), Retention: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Wait)
	var held []string
	for i := range provision.MaxUnfinished {
		j, _, err := p.Submit(tenant, request(w.url("vm/disk.qcow2"), fmt.Sprintf("vm-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, j.ID)
	}
	if _, _, err := p.Submit(tenant, request(w.url("vm/disk.qcow2"), "vm-over")); !errors.Is(err, provision.ErrTooManyJobs) {
		t.Fatalf("a job over the bound: %v, want ErrTooManyJobs", err)
	}
	if _, _, err := p.Submit("another-tenant", request(w.url("vm/disk.qcow2"), "vm-other")); err != nil {
		t.Fatalf("another tenant's job: %v; the bound is per tenant", err)
	}
	if _, err := p.Cancel(tenant, held[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, held[0], ended)
	testenv.Eventually(t, 10*time.Second, func() error {
		if _, _, err := p.Submit(tenant, request(w.url("vm/disk.qcow2"), "vm-next")); err != nil {
			return err
		}
		return nil
	})
	if _, err := p.Get(tenant, held[0]); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("the job that ended past its retention: %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(dir, held[0]+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("its record: %v, want it removed", err)
	}
	for _, who := range []string{tenant, "another-tenant"} { // the held jobs end, so that p.Wait returns
		for _, j := range p.List(who) {
			_, _ = p.Cancel(who, j.ID)
		}
	}
}
