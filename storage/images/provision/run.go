package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/strata-gitops/strata/storage/images/cache"
)

// Images is where images come from.
type Images interface {
	// Digest is the image's SHA-256: declared, when the request gives
	// one, or else read from the object beside the image.
	Digest(ctx context.Context, imageURL, declared string) (cache.Digest, error)
	// Size is the image object's size in bytes.
	Size(ctx context.Context, imageURL string) (int64, error)
	// Copy writes the image object's bytes, as stored, to w.
	Copy(ctx context.Context, imageURL string, w io.Writer) error
	// Source names the image's source for the cache: its URL and the
	// credential it is read with, so that a cached image goes only to
	// requests that could read it themselves.
	Source(imageURL string) string
}

// Volumes makes and removes the volumes jobs fill.
type Volumes interface {
	// Create makes the volume of size bytes, or finds the one of that
	// name (created false), and opens the file or block device its raw
	// disk is written to, for reading and writing: the caller closes it.
	Create(ctx context.Context, tenant, name string, size int64) (target *os.File, created bool, err error)
	// Delete removes a volume a job made.
	Delete(ctx context.Context, tenant, name string) error
}

// run carries a job through its stages, and undoes what it made when
// it fails or is cancelled. A job the Provisioner's stop cut short is
// left as recorded, running, for the next start to resume.
func (p *Provisioner) run(stopping, ctx context.Context, id string) {
	now := time.Now().UTC()
	var req Request
	var tenant string
	_ = p.update(id, func(j *Job) {
		j.Status, j.StartedAt, j.Error, req, tenant = Running, &now, "", j.Request, j.Tenant
	})
	p.notice(id, "ImageJobStarted", "started")
	err := p.fill(ctx, id, tenant, req)
	if err != nil && stopping.Err() != nil {
		return
	}
	var cancelled error
	if err != nil {
		cancelled = ctx.Err()
	}
	p.end(id, err, cancelled)
}

// fill is the job's work: the Filler's, with the job's progress, and
// its volume made once the image's size is known.
func (p *Provisioner) fill(ctx context.Context, id, tenant string, req Request) error {
	size := req.VolumeSizeGB * gib
	f := Filler{Images: p.o.Images, Cache: p.o.Cache, Tool: p.o.Tool}
	var total int64
	return f.Fill(ctx, Image{URL: req.ImageURL, SHA256: req.SHA256, Format: req.ImageType, MaxBytes: imageBound(req.VolumeSizeGB)}, Steps{
		Stage: func(s Stage) { p.stage(id, s) },
		Total: func(n int64) {
			total = n
			_ = p.update(id, func(j *Job) { j.Progress.BytesTotal = n })
		},
		Downloaded: func(n int64) { p.counted(id, n, total) },
		Cached: func(path string, hit bool) {
			_ = p.update(id, func(j *Job) { j.CacheHit, j.ImagePath, j.Progress.BytesProcessed = hit, filepath.Base(path), total })
		},
		Target: func(ctx context.Context, virtualSize int64) (*os.File, error) {
			if virtualSize > size {
				return nil, fmt.Errorf("the image's disk is %d bytes, more than volume_size_gb %d: ask for a volume of at least %d GiB",
					virtualSize, req.VolumeSizeGB, (virtualSize+gib-1)/gib)
			}
			return p.volume(ctx, id, tenant, req, size)
		},
	})
}

// volume makes the job's volume, or takes the one there when the
// request allows it or this job made it before a restart. Whether the
// job made it is recorded before anything is written into it.
func (p *Provisioner) volume(ctx context.Context, id, tenant string, req Request, size int64) (*os.File, error) {
	target, created, err := p.o.Volumes.Create(ctx, tenant, req.VolumeName, size)
	// A volume made is the job's even when what followed its making
	// failed, or the job was cancelled then: the undo must remove it.
	var mine bool
	if uerr := p.update(id, func(j *Job) { j.VolumeCreated = j.VolumeCreated || created; mine = j.VolumeCreated }); err == nil {
		err = uerr
	}
	if err == nil && !mine && !req.Overwrite {
		err = fmt.Errorf("volume %s exists already: nothing was written to it; set overwrite to fill it", req.VolumeName)
	}
	if err != nil {
		if target != nil {
			target.Close()
		}
		return nil, err
	}
	return target, nil
}

// end records how the job ended, deleting the volume it made unless it
// completed.
func (p *Provisioner) end(id string, err, cancelled error) {
	var made bool
	var tenant, name string
	_ = p.update(id, func(j *Job) { made, tenant, name = j.VolumeCreated, j.Tenant, j.Request.VolumeName })
	if (err != nil || cancelled != nil) && made {
		// The job's context may be over: the undo gets its own.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if derr := p.o.Volumes.Delete(ctx, tenant, name); derr != nil {
			err = errors.Join(err, fmt.Errorf("removing the volume %s it made: %w", name, derr))
		} else {
			made = false
		}
	}
	status, message := Completed, ""
	switch {
	case cancelled != nil:
		status, message = Cancelled, "cancelled"
		p.notice(id, "ImageJobCancelled", "cancelled")
	case err != nil:
		status, message = Failed, withoutHostPaths(reason(err))
		p.notice(id, "ImageJobFailed", "failed: "+reason(err)) // the node's events and log keep the whole error
	default:
		p.notice(id, "ImageJobCompleted", "completed")
	}
	// Told before the job shows as ended: whoever waits for the end then
	// finds it told.
	now := time.Now().UTC()
	_ = p.update(id, func(j *Job) {
		j.CompletedAt, j.VolumeCreated, j.Status, j.Error = &now, made, status, message
		if status == Completed {
			j.Progress.Percent = 100
		}
	})
}

// stage records the stage the job enters.
func (p *Provisioner) stage(id string, s Stage) {
	_ = p.update(id, func(j *Job) { j.Progress.Stage, j.Progress.Percent = s, stageStart[s] })
	p.notice(id, "ImageJobProgress", string(s))
}

// notice tells Options.Notice what happened to a job, naming it, its
// tenant, image and volume.
func (p *Provisioner) notice(id, reason, what string) {
	if p.o.Notice == nil {
		return
	}
	j, ok := p.snapshot(id)
	if !ok {
		return
	}
	p.o.Notice(reason, fmt.Sprintf("image job %s of tenant %s (%s into volume %s): %s", id, j.Tenant, j.Request.ImageURL, j.Request.VolumeName, what))
}

// counted adds n downloaded bytes to the job's progress. Not recorded
// on disk: a restart downloads again anyway.
func (p *Provisioner) counted(id string, n, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j := p.jobs[id]
	j.Progress.BytesProcessed += n
	if total > 0 {
		span := int64(stageStart[CreatingVolume] - stageStart[Downloading])
		j.Progress.Percent = stageStart[Downloading] + int(min(span, span*j.Progress.BytesProcessed/total))
	}
}

// counter counts what passes through it.
type counter struct {
	w   io.Writer
	add func(int64)
}

func (c *counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.add(int64(n))
	return n, err
}

// imageBound is the most an image filling a volume of sizeGB may be,
// decompressed: the volume's size, and for a qcow2 a sixteenth more and
// 16 MiB for its tables. A tenant's image fills the cache no further
// than the volume it asked for.
func imageBound(sizeGB int64) int64 {
	size := sizeGB * gib
	return size + size/16 + 16<<20
}

// hostPath is an absolute path in an error's text: one after the start,
// a space, a quote, a parenthesis or an equals sign (so not the path of
// a URL, which follows a colon and two slashes).
var hostPath = regexp.MustCompile(`(^|[\s"'(=])/[^\s"'(),:]+`)

// withoutHostPaths is an error as its tenant reads it: the host's paths
// (the cache, the volume's file or device, qemu-img's command line) are
// the agent's, not the tenant's, and are left out.
func withoutHostPaths(message string) string {
	return hostPath.ReplaceAllString(message, "$1<host path>")
}
