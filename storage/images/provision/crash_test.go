package provision_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// childEnv, when set, makes the test binary a provisioner process of the
// crash test: the JSON of a childConfig.
const childEnv = "STRATA_PROVISION_CHILD"

// childConfig is what the child runs on: the parent's MinIO, store, cache
// and job records, and a request to submit, if any.
type childConfig struct {
	MinIO             testenv.MinIO
	Base, Cache, Jobs string
	Submit            *provision.Request
}

func TestMain(m *testing.M) {
	if config := os.Getenv(childEnv); config != "" {
		os.Exit(runChild(config))
	}
	os.Exit(m.Run())
}

// runChild runs a Provisioner until it is killed.
func runChild(config string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	p, err := openOn(ctx, c)
	if err == nil && c.Submit != nil {
		_, _, err = p.Submit(tenant, *c.Submit)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {} // until the parent kills it
}

func openOn(ctx context.Context, c childConfig) (*provision.Provisioner, error) {
	store, err := btrfsnode.Open(ctx, c.Base, nil, "node-a")
	if err != nil {
		return nil, err
	}
	images, err := cache.Open(c.Cache, 0)
	if err != nil {
		return nil, err
	}
	return provision.Open(ctx, provision.Options{Dir: c.Jobs, Cache: images, Tool: qemuimg.New(),
		Images:  provision.BucketImages{AccessKey: c.MinIO.AccessKey, SecretKey: c.MinIO.SecretKey, Endpoints: []string{c.MinIO.Endpoint}},
		Volumes: provision.BtrfsVolumes{Store: store}})
}

// A provisioner killed with SIGKILL in the middle of a job's download,
// then of its conversion, leaves nothing half done: the next start
// resumes the job, which completes with the image's disk, and the cache
// holds only whole images.
func TestAKilledProvisionerResumesItsJob(t *testing.T) {
	w := newWorld(t)
	url, big := w.slowImage(t)
	c := childConfig{MinIO: w.minio, Base: w.store.Base, Cache: t.TempDir(), Jobs: t.TempDir()}
	req := request(url, "vm-killed")
	c.Submit = &req
	for _, stage := range []provision.Stage{provision.Downloading, provision.Converting} {
		killDuring(t, c, stage)
		c.Submit = nil // the job is on record: later starts resume it
	}
	p, err := openOn(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Wait)
	jobs := p.List(tenant)
	if len(jobs) != 1 {
		t.Fatalf("%d jobs on record; want the one", len(jobs))
	}
	j := waitFor(t, p, jobs[0].ID, ended)
	if j.Status != provision.Completed || j.Resumed != 2 || !j.VolumeCreated {
		t.Fatalf("the job after two kills: %+v; want it completed on its own volume, resumed at each of the two later starts", j)
	}
	got := w.diskOf(t, "vm-killed")
	for i := 0; i < len(big); i += 4096 {
		if got[i] != big[i] {
			t.Fatalf("the volume's byte %d is %d, the image's %d", i, got[i], big[i])
		}
	}
	entries, err := os.ReadDir(c.Cache)
	var images []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "sources-") { // the record of who delivered an image
			images = append(images, e.Name())
		}
	}
	if err != nil || len(images) != 1 {
		t.Fatalf("the cache holds %v (%v); want the one whole image", images, err)
	}
}

// slowImage puts a qcow2 image of a 192 MiB disk in the bucket "slow",
// whose download and conversion take long enough to be caught in, and
// returns its URL and disk.
func (w *world) slowImage(t *testing.T) (string, []byte) {
	t.Helper()
	disk := make([]byte, 192*mib)
	for i := 0; i < len(disk); i += 4096 {
		disk[i] = byte(i / 4096)
	}
	w.minio.Put(t, "slow", testenv.WithChecksums(map[string][]byte{"vm/big.qcow2": testenv.Qcow2(t, disk)}))
	return w.minio.Endpoint + "/slow/vm/big.qcow2", disk
}

// killDuring starts a provisioner process on c and kills it once its job
// is recorded in stage.
func killDuring(t *testing.T, c childConfig, stage provision.Stage) {
	t.Helper()
	config, _ := json.Marshal(c)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+string(config))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Wait() }()
	testenv.Eventually(t, time.Minute, func() error {
		records, _ := filepath.Glob(filepath.Join(c.Jobs, "*.json"))
		for _, r := range records {
			var j provision.Job
			data, _ := os.ReadFile(r)
			if json.Unmarshal(data, &j) == nil && j.Progress.Stage == stage {
				return nil
			}
		}
		return fmt.Errorf("no job at %s yet", stage)
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
