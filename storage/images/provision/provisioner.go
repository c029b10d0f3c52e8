package provision

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// DefaultConcurrency is how many jobs run at once unless the options say
// otherwise: as libvirt-volume-provisioner, two.
const DefaultConcurrency = 2

// DefaultRetention is how long an ended job's record is kept unless the
// options say otherwise: a day, for its caller to read how it ended.
const DefaultRetention = 24 * time.Hour

// MaxUnfinished bounds the jobs one tenant has not ended: each holds a
// record and waits for a slot, so without a bound a tenant could fill the
// agent's memory and disk with jobs.
const MaxUnfinished = 16

// Options are what a Provisioner works with.
type Options struct {
	// Dir keeps one record per job.
	Dir     string
	Cache   *cache.Cache
	Images  Images
	Volumes Volumes
	Tool    qemuimg.Tool
	// Concurrency bounds the jobs running at once; 0 is
	// DefaultConcurrency.
	Concurrency int
	// Retention is how long an ended job is kept: its record is removed
	// after, at the next start or submit. 0 is DefaultRetention.
	Retention time.Duration
	// Notice, when set, is told each job's start, stages and end, as a
	// reason and a message naming the job: the agent records them as
	// events on its Node.
	Notice func(reason, message string)
}

// Provisioner runs jobs.
type Provisioner struct {
	o     Options
	slots chan struct{}
	// life ends when the Provisioner stops: jobs outlive the requests
	// that started them, not the Provisioner.
	life context.Context

	mu      sync.Mutex
	jobs    map[string]*Job
	cancels map[string]context.CancelFunc
	byKey   map[string]string
	wg      sync.WaitGroup
}

// ErrNotFound is a job ID no job has.
var ErrNotFound = errors.New("no such job")

// ErrFinished is a cancel of a job that has ended.
var ErrFinished = errors.New("the job has ended")

// ErrTooManyJobs is a submit of a tenant with MaxUnfinished jobs not
// ended.
var ErrTooManyJobs = fmt.Errorf("the tenant has %d image jobs that have not ended; wait for one, or cancel one", MaxUnfinished)

// Open reads the jobs recorded in o.Dir and resumes every one a stop
// interrupted; ctx bounds the Provisioner's life.
func Open(ctx context.Context, o Options) (*Provisioner, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("image jobs %s: %w", o.Dir, err)
	}
	p := &Provisioner{o: o, slots: make(chan struct{}, o.Concurrency), life: ctx, jobs: map[string]*Job{},
		cancels: map[string]context.CancelFunc{}, byKey: map[string]string{}}
	recorded, err := p.load()
	if err != nil {
		return nil, err
	}
	for _, j := range recorded {
		p.jobs[j.ID] = j
		if j.Request.IdempotencyKey != "" {
			p.byKey[j.Tenant+"/"+j.Request.IdempotencyKey] = j.ID
		}
	}
	p.pruneLocked()
	for _, j := range p.jobs {
		if !j.done() {
			j.Resumed++
			j.Status = Pending
			p.start(ctx, j)
		}
	}
	return p, nil
}

// pruneLocked removes the jobs that ended longer than the retention ago,
// with their records. A record that cannot be removed is kept, and tried
// again at the next prune.
func (p *Provisioner) pruneLocked() {
	now := time.Now()
	for id, j := range p.jobs {
		if !j.done() || j.CompletedAt == nil || now.Sub(*j.CompletedAt) < p.o.Retention {
			continue
		}
		if err := os.Remove(filepath.Join(p.o.Dir, id+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			continue
		}
		delete(p.jobs, id)
		if key := j.Tenant + "/" + j.Request.IdempotencyKey; p.byKey[key] == id {
			delete(p.byKey, key)
		}
	}
}

// unfinishedLocked counts the tenant's jobs that have not ended.
func (p *Provisioner) unfinishedLocked(tenant string) int {
	n := 0
	for _, j := range p.jobs {
		if j.Tenant == tenant && !j.done() {
			n++
		}
	}
	return n
}

// load reads every job's record.
func (p *Provisioner) load() ([]*Job, error) {
	files, err := filepath.Glob(filepath.Join(p.o.Dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var jobs []*Job
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		j := &Job{}
		if err := json.Unmarshal(data, j); err != nil {
			return nil, fmt.Errorf("image job record %s: %w; move it away to start without it", f, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// Submit starts a job of tenant's for req, or returns the job an
// earlier request of the tenant's with the same idempotency key started
// (existing true).
func (p *Provisioner) Submit(tenant string, req Request) (job Job, existing bool, err error) {
	if err := req.check(); err != nil {
		return Job{}, false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked()
	key := tenant + "/" + req.IdempotencyKey
	if id, ok := p.byKey[key]; ok && req.IdempotencyKey != "" {
		return *p.jobs[id], true, nil
	}
	if p.unfinishedLocked(tenant) >= MaxUnfinished {
		return Job{}, false, ErrTooManyJobs
	}
	j := &Job{ID: newID(), Tenant: tenant, CorrelationID: req.CorrelationID, Request: req, Status: Pending, CreatedAt: time.Now().UTC()}
	if err := p.saveLocked(j); err != nil {
		return Job{}, false, err
	}
	p.jobs[j.ID] = j
	if req.IdempotencyKey != "" {
		p.byKey[key] = j.ID
	}
	p.start(p.life, j)
	return *j, false, nil
}

// Get returns tenant's job with id; another tenant's is not found.
func (p *Provisioner) Get(tenant, id string) (Job, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, err := p.jobLocked(tenant, id)
	if err != nil {
		return Job{}, err
	}
	return *j, nil
}

// snapshot is a copy of any tenant's job with id.
func (p *Provisioner) snapshot(id string) (Job, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

func (p *Provisioner) jobLocked(tenant, id string) (*Job, error) {
	j, ok := p.jobs[id]
	if !ok || j.Tenant != tenant {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return j, nil
}

// List returns tenant's jobs, the newest first.
func (p *Provisioner) List(tenant string) []Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	jobs := []Job{}
	for _, j := range p.jobs {
		if j.Tenant == tenant {
			jobs = append(jobs, *j)
		}
	}
	slices.SortFunc(jobs, func(a, b Job) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return jobs
}

// Cancel stops tenant's pending or running job; its work stops within
// a second, and what it made is undone.
func (p *Provisioner) Cancel(tenant, id string) (Job, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, err := p.jobLocked(tenant, id)
	if err != nil {
		return Job{}, err
	}
	if j.done() {
		return *j, fmt.Errorf("job %s is %s: %w", id, j.Status, ErrFinished)
	}
	if cancel, ok := p.cancels[id]; ok { // gone once its goroutine ended, as the Provisioner stopped
		cancel()
	}
	return *j, nil
}

// Wait waits for every job started to end (tests, and a stop).
func (p *Provisioner) Wait() { p.wg.Wait() }

// start runs the job in the background once a slot is free. stopping
// ends with the Provisioner; the job's own context also ends with a
// cancel.
func (p *Provisioner) start(stopping context.Context, j *Job) {
	ctx, cancel := context.WithCancel(stopping)
	p.cancels[j.ID] = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			cancel()
			p.mu.Lock()
			delete(p.cancels, j.ID)
			p.mu.Unlock()
		}()
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
			p.run(stopping, ctx, j.ID)
		case <-ctx.Done():
			if stopping.Err() == nil {
				p.end(j.ID, nil, ctx.Err())
			}
		}
	}()
}

// update changes the job under the lock and records it.
func (p *Provisioner) update(id string, change func(*Job)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	j := p.jobs[id]
	change(j)
	return p.saveLocked(j)
}

// saveLocked records the job, durably: a restart must know whether the
// job made its volume before it writes into it.
func (p *Provisioner) saveLocked(j *Job) error {
	data, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(p.o.Dir, j.ID+".json"), data); err != nil {
		return fmt.Errorf("recording job %s: %w", j.ID, err)
	}
	return nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// reason is an error as a job reports it.
func reason(err error) string {
	return strings.TrimSpace(err.Error())
}

// Counts is how many of the jobs on record are in each state.
func (p *Provisioner) Counts() map[State]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := map[State]int{}
	for _, j := range p.jobs {
		counts[j.Status]++
	}
	return counts
}
