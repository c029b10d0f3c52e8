// Command imagebench measures image jobs (storage/images/provision)
// beside their floor, on a MinIO server and a loop btrfs of their own:
//
//   - a job whose image is not cached, beside the floor: the same object
//     downloaded alone to a file, plus `qemu-img convert` of that file
//     onto a new raw disk, done alone;
//   - a job whose image is cached, beside one that is not;
//   - 10 jobs of one image submitted at once, beside one.
//
// The image is a qcow2 of a -size MiB disk whose first half is random.
// Rounds alternate, floor first, in one process, so the ratios are
// measured side by side. `make bench` runs it (root only).
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-gitops/strata/internal/local/localdisk"
	"github.com/strata-gitops/strata/internal/loopdev"
	"github.com/strata-gitops/strata/internal/testing/benchstat"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/images/bucket"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

const tenant = "bench"

type config struct {
	sizeMiB, rounds, jobs int
}

func main() {
	var c config
	flag.IntVar(&c.sizeMiB, "size", 1024, "MiB of the image's disk; its first half is random data")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs the floor, then strata")
	flag.IntVar(&c.jobs, "jobs", 10, "jobs of one image submitted at once")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if os.Geteuid() != 0 {
		log.Fatal("imagebench attaches loop devices and mounts: run as root")
	}
	dir, err := os.MkdirTemp("", "strata-imagebench-")
	if err != nil {
		log.Fatal(err)
	}
	err = run(dir, c)
	_ = exec.Command("umount", "--recursive", filepath.Join(dir, "btrfs")).Run()
	_ = loopdev.DetachUnder(dir)
	_ = os.RemoveAll(dir)
	if err != nil {
		log.Fatal(err)
	}
}

// bench is what every round shares: the bucket with the image, and the
// node's btrfs store.
type bench struct {
	dir    string
	c      config
	minio  testenv.MinIO
	bucket *bucket.Bucket
	store  *btrfsnode.Store
	url    string
	object int64
	n      int
}

// result is one round's figures.
type result struct {
	download, convert, cold, hit, one, many time.Duration
}

func run(dir string, c config) error {
	b := &bench{dir: dir, c: c}
	stop, err := b.setUp()
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("image jobs: a qcow2 of %d bytes for a %d MiB disk, %d rounds (floor: the download alone, then qemu-img convert alone)\n",
		b.object, c.sizeMiB, c.rounds)
	var all []result
	for round := 1; round <= c.rounds; round++ {
		r, err := b.round()
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		fmt.Printf("round %d: job %s (floor %s = download %s + convert %s), cached %s, %d jobs at once %s (one %s)\n", round,
			r.cold.Round(time.Millisecond), (r.download + r.convert).Round(time.Millisecond), r.download.Round(time.Millisecond),
			r.convert.Round(time.Millisecond), r.hit.Round(time.Millisecond), c.jobs, r.many.Round(time.Millisecond), r.one.Round(time.Millisecond))
		all = append(all, r)
	}
	report(all, c)
	return nil
}

// setUp starts MinIO with the image and mounts the btrfs.
func (b *bench) setUp() (func(), error) {
	var stop func()
	var err error
	if b.minio, stop, err = testenv.RunMinIO(filepath.Join(testenv.RepoRoot(), "bin", "minio"), b.dir); err != nil {
		return nil, err
	}
	image, err := b.image()
	if err != nil {
		return stop, err
	}
	b.object = int64(len(image))
	if err := b.minio.PutObjects("images", testenv.WithChecksums(map[string][]byte{"disk.qcow2": image})); err != nil {
		return stop, err
	}
	b.url = b.minio.Endpoint + "/images/disk.qcow2"
	if b.bucket, err = bucket.Open(bucket.Options{Endpoint: b.minio.Endpoint, Bucket: "images", AccessKey: b.minio.AccessKey, SecretKey: b.minio.SecretKey}); err != nil {
		return stop, err
	}
	img := filepath.Join(b.dir, "btrfs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return stop, err
	}
	if err := os.Truncate(img, 64<<30); err != nil {
		return stop, err
	}
	dev, err := loopdev.Attach(img)
	if err != nil {
		return stop, err
	}
	if err := localdisk.MountBtrfs(dev, filepath.Join(b.dir, "btrfs")); err != nil {
		return stop, err
	}
	b.store, err = btrfsnode.Open(context.Background(), filepath.Join(b.dir, "btrfs", "strata"), nil, "node-a")
	return stop, err
}

// image is the qcow2 of the benchmark's disk.
func (b *bench) image() ([]byte, error) {
	raw, qcow2 := filepath.Join(b.dir, "disk.raw"), filepath.Join(b.dir, "disk.qcow2")
	f, err := os.Create(raw)
	if err != nil {
		return nil, err
	}
	half := int64(b.c.sizeMiB) << 19
	_, err = io.CopyN(f, rand.Reader, half)
	if err == nil {
		err = f.Truncate(2 * half)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow2).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img convert: %v: %s", err, out)
	}
	return os.ReadFile(qcow2)
}

// round runs the floor, then the jobs, each on volumes of its own.
func (b *bench) round() (result, error) {
	var r result
	var err error
	if r.download, r.convert, err = b.floor(); err != nil {
		return r, err
	}
	p, stop, err := b.provisioner()
	if err != nil {
		return r, err
	}
	defer stop()
	if r.cold, err = b.jobs(p, 1); err != nil {
		return r, err
	}
	if r.hit, err = b.jobs(p, 1); err != nil {
		return r, err
	}
	if p, stop, err = b.provisioner(); err != nil { // a cold cache again
		return r, err
	}
	defer stop()
	if r.many, err = b.jobs(p, b.c.jobs); err != nil {
		return r, err
	}
	p, stop, err = b.provisioner()
	if err != nil {
		return r, err
	}
	defer stop()
	r.one, err = b.jobs(p, 1)
	return r, err
}

// floor downloads the object to a file alone, then converts it onto a
// new raw disk on the same btrfs alone.
func (b *bench) floor() (download, convert time.Duration, err error) {
	dir, err := os.MkdirTemp(filepath.Join(b.dir, "btrfs"), "floor-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	local, disk := filepath.Join(dir, "disk.qcow2"), filepath.Join(dir, "disk.raw")
	start := time.Now()
	f, err := os.Create(local)
	if err != nil {
		return 0, 0, err
	}
	if err := b.bucket.Copy(context.Background(), "disk.qcow2", f); err != nil {
		f.Close()
		return 0, 0, err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	download = time.Since(start)
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		return 0, 0, err
	}
	if err := os.Truncate(disk, int64(b.c.sizeMiB)<<20); err != nil {
		return 0, 0, err
	}
	start = time.Now()
	if out, err := exec.Command("qemu-img", "convert", "-n", "-f", "qcow2", "-O", "raw", local, disk).CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("qemu-img convert: %v: %s", err, out)
	}
	return download, time.Since(start), nil
}

// provisioner is a Provisioner with an empty cache of its own.
func (b *bench) provisioner() (*provision.Provisioner, func(), error) {
	dir, err := os.MkdirTemp(b.dir, "jobs-")
	if err != nil {
		return nil, nil, err
	}
	cached, err := cache.Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := provision.Open(ctx, provision.Options{Dir: filepath.Join(dir, "jobs"), Cache: cached, Tool: qemuimg.New(),
		Images:  provision.BucketImages{AccessKey: b.minio.AccessKey, SecretKey: b.minio.SecretKey, Endpoints: []string{b.minio.Endpoint}},
		Volumes: provision.BtrfsVolumes{Store: b.store}})
	stop := func() {
		cancel()
		if p != nil {
			p.Wait()
		}
		_ = os.RemoveAll(dir)
	}
	return p, stop, err
}

// jobs submits n jobs of the image at once, each for a new volume, and
// returns how long until all completed; the volumes go afterwards.
func (b *bench) jobs(p *provision.Provisioner, n int) (time.Duration, error) {
	start := time.Now()
	var ids, names []string
	for range n {
		b.n++
		name := fmt.Sprintf("vm-%d", b.n)
		j, _, err := p.Submit(tenant, provision.Request{ImageURL: b.url, VolumeName: name, VolumeSizeGB: int64(b.c.sizeMiB+1023) >> 10, ImageType: qemuimg.QCOW2})
		if err != nil {
			return 0, err
		}
		ids, names = append(ids, j.ID), append(names, name)
	}
	for _, id := range ids {
		for {
			j, err := p.Get(tenant, id)
			if err != nil {
				return 0, err
			}
			if j.Status == provision.Failed || j.Status == provision.Cancelled {
				return 0, fmt.Errorf("job %s: %s %s", id, j.Status, j.Error)
			}
			if j.Status == provision.Completed {
				break
			}
			time.Sleep(10 * time.Millisecond) // a benchmark's poll, not a test's wait
		}
	}
	took := time.Since(start)
	for _, name := range names {
		if err := b.store.Delete(context.Background(), tenant, name, false); err != nil {
			return 0, err
		}
	}
	return took, nil
}

// report prints the medians and ratios over the rounds.
func report(all []result, c config) {
	med := func(pick func(result) time.Duration) time.Duration {
		var d []time.Duration
		for _, r := range all {
			d = append(d, pick(r))
		}
		return benchstat.Percentile(d, 50)
	}
	cold := med(func(r result) time.Duration { return r.cold })
	floor := med(func(r result) time.Duration { return r.download + r.convert })
	hit := med(func(r result) time.Duration { return r.hit })
	one, many := med(func(r result) time.Duration { return r.one }), med(func(r result) time.Duration { return r.many })
	disk := float64(c.sizeMiB)
	fmt.Printf("%-34s %12s %12s %10s\n", "median of rounds", "strata", "reference", "ratio")
	fmt.Printf("%-34s %12s %12s %9.0f%%   (%.0f MiB/s of disk; target: 90%% of the floor or more)\n", "job, not cached / floor",
		cold.Round(time.Millisecond), floor.Round(time.Millisecond), 100*floor.Seconds()/cold.Seconds(), disk/cold.Seconds())
	fmt.Printf("%-34s %12s %12s %9.2fx\n", "job, cached / not cached", hit.Round(time.Millisecond), cold.Round(time.Millisecond), hit.Seconds()/cold.Seconds())
	fmt.Printf("%-34s %12s %12s %9.2fx   (%d jobs, %d at a time, one download)\n", fmt.Sprintf("%d jobs at once / one job", c.jobs),
		many.Round(time.Millisecond), one.Round(time.Millisecond), many.Seconds()/one.Seconds(), c.jobs, provision.DefaultConcurrency)
}
