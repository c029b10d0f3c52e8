// Package provision runs the jobs that fill volumes from VM disk images:
// the image verified into the node's cache, the volume made (or, when a
// request says so, an existing one reused), the image converted onto it
// and read back. Jobs are recorded on disk as they go, so a restart
// resumes them. Their fields, stages and states are
// libvirt-volume-provisioner's, so that its clients keep working
// (docs/images.md).
package provision

import (
	"fmt"
	"time"

	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// Request asks for a volume filled from an image: the body of POST
// /api/v1/provision, with strata's additions last.
type Request struct {
	ImageURL     string `json:"image_url"`
	VolumeName   string `json:"volume_name"`
	VolumeSizeGB int64  `json:"volume_size_gb"`
	ImageType    string `json:"image_type"`
	// SHA256 declares the image's digest; without it the object
	// <image>.sha256 beside the image must.
	SHA256 string `json:"sha256,omitempty"`
	// Overwrite lets the job fill a volume that exists already. Without
	// it such a volume is never written, and never deleted.
	Overwrite bool `json:"overwrite,omitempty"`
	// IdempotencyKey makes a repeated request return the first one's job.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// CorrelationID is the caller's, echoed in the job.
	CorrelationID string `json:"correlation_id,omitempty"`
}

// gib is the unit of volume_size_gb.
const gib = 1 << 30

func (r Request) check() error {
	switch {
	case r.ImageURL == "":
		return fmt.Errorf("image_url is empty: give the image's URL, http(s)://<endpoint>/<bucket>/<object>")
	case r.VolumeName == "":
		return fmt.Errorf("volume_name is empty: name the volume to fill")
	case r.VolumeSizeGB <= 0:
		return fmt.Errorf("volume_size_gb %d: give the volume's size in GiB, at least the image's virtual size", r.VolumeSizeGB)
	case r.ImageType != qemuimg.QCOW2 && r.ImageType != qemuimg.Raw:
		return fmt.Errorf("image_type %q: use qcow2 or raw", r.ImageType)
	}
	return nil
}

// State is where a job is: pending, running, completed, failed or
// cancelled.
type State string

const (
	Pending   State = "pending"
	Running   State = "running"
	Completed State = "completed"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// Stage is what a running job does.
type Stage string

const (
	CheckingCache  Stage = "checking_cache"
	Downloading    Stage = "downloading"
	CreatingVolume Stage = "creating_volume"
	Converting     Stage = "converting"
	Finalizing     Stage = "finalizing"
)

// stageStart is where each stage starts on the job's percent: the
// download takes the most of it, counted by bytes.
var stageStart = map[Stage]int{CheckingCache: 0, Downloading: 5, CreatingVolume: 60, Converting: 65, Finalizing: 95}

// Progress is how far a job is.
type Progress struct {
	Stage          Stage `json:"stage,omitempty"`
	Percent        int   `json:"percent"`
	BytesProcessed int64 `json:"bytes_processed"`
	BytesTotal     int64 `json:"bytes_total"`
}

// Job is one request's work and outcome: GET /api/v1/status/{job_id}.
type Job struct {
	ID string `json:"job_id"`
	// Tenant owns the job and its volume: the tenant of the token that
	// asked for it.
	Tenant        string   `json:"tenant"`
	CorrelationID string   `json:"correlation_id,omitempty"`
	Request       Request  `json:"request"`
	Status        State    `json:"status"`
	Progress      Progress `json:"progress"`
	Error         string   `json:"error,omitempty"`
	CacheHit      bool     `json:"cache_hit"`
	// ImagePath is the cached image the volume was filled from.
	ImagePath   string     `json:"image_path,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	// VolumeCreated says this job made its volume: only then may undoing
	// the job delete it.
	VolumeCreated bool `json:"volume_created"`
	// Resumed counts the restarts that found the job unfinished.
	Resumed int `json:"resumed,omitempty"`
}

// done says whether the job has ended.
func (j *Job) done() bool {
	return j.Status == Completed || j.Status == Failed || j.Status == Cancelled
}
