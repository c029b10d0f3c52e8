package volumeapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/strata-gitops/strata/storage/images/provision"
)

// Provision starts an image job, or finds the one its idempotency key
// started, and returns its ID.
func (c *Client) Provision(ctx context.Context, req provision.Request) (string, error) {
	var out struct {
		JobID string `json:"job_id"`
	}
	return out.JobID, c.do(ctx, http.MethodPost, "/api/v1/provision", req, &out)
}

// ImageJob returns an image job.
func (c *Client) ImageJob(ctx context.Context, id string) (j provision.Job, err error) {
	return j, c.do(ctx, http.MethodGet, "/api/v1/status/"+url.PathEscape(id), nil, &j)
}

// CancelImageJob cancels an image job.
func (c *Client) CancelImageJob(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/cancel/"+url.PathEscape(id), nil, nil)
}

// ImageJobs lists the tenant's image jobs, the newest first.
func (c *Client) ImageJobs(ctx context.Context) ([]provision.Job, error) {
	var out struct {
		Jobs []provision.Job `json:"jobs"`
	}
	return out.Jobs, c.do(ctx, http.MethodGet, "/api/v1/jobs", nil, &out)
}
