package provision_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/strata-gitops/strata/internal/command"
	"github.com/strata-gitops/strata/internal/confine"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// held blocks a job in one stage until it is cancelled: the digest
// (checking_cache), the volume (creating_volume), or qemu-img compare
// (finalizing). The other stages are held by the download's gate and by a
// slow conversion (TestACancelStopsAJobWithinASecond,
// TestACancelStopsAConversionAndAWaitingJob).
type held struct {
	provision.BucketImages
	provision.BtrfsVolumes
	stage provision.Stage
	// run is the confined qemu-img runner qemuimg asked for.
	run command.Runner
}

func (h held) Confined(p confine.Paths) command.Runner {
	h.run = command.Exec{}.Confined(p)
	return h
}

func (h held) wait(ctx context.Context, in provision.Stage) error {
	if h.stage != in {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h held) Digest(ctx context.Context, imageURL, declared string) (cache.Digest, error) {
	if err := h.wait(ctx, provision.CheckingCache); err != nil {
		return "", err
	}
	return h.BucketImages.Digest(ctx, imageURL, declared)
}

func (h held) Create(ctx context.Context, tenant, name string, size int64) (*os.File, bool, error) {
	target, created, err := h.BtrfsVolumes.Create(ctx, tenant, name, size)
	if err == nil {
		err = h.wait(ctx, provision.CreatingVolume)
	}
	return target, created, err
}

// Run holds qemu-img compare, the read-back check.
func (h held) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if slices.Contains(args, "compare") {
		if err := h.wait(ctx, provision.Finalizing); err != nil {
			return nil, err
		}
	}
	if h.run == nil {
		return command.Exec{}.Run(ctx, name, args...)
	}
	return h.run.Run(ctx, name, args...)
}

// A cancel stops a job within a second in every stage, and leaves
// neither the volume it made nor anything in the cache but whole images.
func TestACancelStopsAJobInEveryStage(t *testing.T) {
	w := newWorld(t)
	for _, stage := range []provision.Stage{provision.CheckingCache, provision.CreatingVolume, provision.Finalizing} {
		h := held{BucketImages: w.images(), BtrfsVolumes: provision.BtrfsVolumes{Store: w.store}, stage: stage}
		p, err := provision.Open(context.Background(), provision.Options{Dir: t.TempDir(), Cache: w.cache, Images: h, Volumes: h,
			Tool: qemuimg.Tool{Runner: h}})
		if err != nil {
			t.Fatal(err)
		}
		volume := "vm-" + string(stage)
		j, _, err := p.Submit(tenant, request(w.url("vm/disk.qcow2"), volume))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, p, j.ID, func(j provision.Job) error {
			if j.Progress.Stage != stage {
				return fmt.Errorf("job %s is at %q, not yet %q", j.ID, j.Progress.Stage, stage)
			}
			return nil
		})
		if stage == provision.CreatingVolume {
			// Held once the volume is made: the cancel must remove it.
			testenv.Eventually(t, time.Minute, func() error {
				if !w.volumeExists(volume) {
					return fmt.Errorf("volume %s not made yet", volume)
				}
				return nil
			})
		}
		asked := time.Now()
		if _, err := p.Cancel(tenant, j.ID); err != nil {
			t.Fatal(err)
		}
		j = waitFor(t, p, j.ID, ended)
		if j.Status != provision.Cancelled || time.Since(asked) > time.Second || w.volumeExists(volume) {
			t.Errorf("a cancel in %s: %s after %s, volume left %v; want cancelled within a second, nothing left",
				stage, j.Status, time.Since(asked), w.volumeExists(volume))
		}
		p.Wait()
	}
}
