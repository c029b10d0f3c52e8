package volumeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/strata-gitops/strata/storage/agent/mover"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

// maxResponse bounds what a client reads of an answer: a peer or agent
// that answers without end fills no memory.
const maxResponse = 16 << 20

// Client calls an agent's API as one tenant.
type Client struct {
	// URL is the agent's base URL, such as http://storage-1:8420.
	URL   string
	Token string
	HTTP  *http.Client
}

// Error is a response other than a success.
type Error struct {
	Status  int
	Reason  string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("agent answered %d %s: %s", e.Status, e.Reason, e.Message)
}

// StatusOf is the HTTP status of an API error, 0 for another error.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// ReasonOf is the reason an API error gives, empty for another error.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.roundTrip(req, out)
}

// request is a request to the agent with the client's token.
func (c *Client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return req, nil
}

// roundTrip sends req and decodes a success into out, or returns the
// agent's error.
func (c *Client) roundTrip(req *http.Request, out any) error {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e struct {
			errorBody
			// Details is the image routes' message, whose error is a code.
			Details string `json:"details"`
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		if e.Details != "" {
			e.Reason, e.Error = e.Error, e.Details
		}
		return &Error{Status: resp.StatusCode, Reason: e.Reason, Message: e.Error}
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(out)
}

// CreateVolume creates a volume, or returns the one of that name and size.
func (c *Client) CreateVolume(ctx context.Context, req wire.CreateRequest) (v wire.Volume, err error) {
	return v, c.do(ctx, http.MethodPost, "/v1/volumes", req, &v)
}

// GetVolume returns a volume.
func (c *Client) GetVolume(ctx context.Context, name string) (v wire.Volume, err error) {
	return v, c.do(ctx, http.MethodGet, "/v1/volumes/"+url.PathEscape(name), nil, &v)
}

// ListVolumes returns the tenant's volumes by name.
func (c *Client) ListVolumes(ctx context.Context) ([]wire.Volume, error) {
	var out struct {
		Volumes []wire.Volume `json:"volumes"`
	}
	return out.Volumes, c.do(ctx, http.MethodGet, "/v1/volumes", nil, &out)
}

// UpdateVolume expands or retunes a volume.
func (c *Client) UpdateVolume(ctx context.Context, name string, req wire.UpdateRequest) (v wire.Volume, err error) {
	return v, c.do(ctx, http.MethodPatch, "/v1/volumes/"+url.PathEscape(name), req, &v)
}

// DeleteVolume deletes a volume; cascade removes its snapshots and
// exports too.
func (c *Client) DeleteVolume(ctx context.Context, name string, cascade bool) error {
	path := "/v1/volumes/" + url.PathEscape(name)
	if cascade {
		path += "?cascade=true"
	}
	return c.do(ctx, http.MethodDelete, path, nil, nil)
}

// CreateSnapshot creates a read-only snapshot of a volume.
func (c *Client) CreateSnapshot(ctx context.Context, req wire.SnapshotRequest) (s wire.Snapshot, err error) {
	return s, c.do(ctx, http.MethodPost, "/v1/snapshots", req, &s)
}

// GetSnapshot returns a snapshot.
func (c *Client) GetSnapshot(ctx context.Context, name string) (s wire.Snapshot, err error) {
	return s, c.do(ctx, http.MethodGet, "/v1/snapshots/"+url.PathEscape(name), nil, &s)
}

// ListSnapshots returns the tenant's snapshots, of one volume when
// volume is not empty.
func (c *Client) ListSnapshots(ctx context.Context, volume string) ([]wire.Snapshot, error) {
	path := "/v1/snapshots"
	if volume != "" {
		path = "/v1/volumes/" + url.PathEscape(volume) + "/snapshots"
	}
	var out struct {
		Snapshots []wire.Snapshot `json:"snapshots"`
	}
	return out.Snapshots, c.do(ctx, http.MethodGet, path, nil, &out)
}

// DeleteSnapshot deletes a snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(name), nil, nil)
}

// Clone makes a writable volume from a volume or snapshot.
func (c *Client) Clone(ctx context.Context, req wire.CloneRequest) (v wire.Volume, err error) {
	return v, c.do(ctx, http.MethodPost, "/v1/clones", req, &v)
}

// AddExport lets an NFS client mount a volume.
func (c *Client) AddExport(ctx context.Context, name, client string) (v wire.Volume, err error) {
	return v, c.do(ctx, http.MethodPost, "/v1/volumes/"+url.PathEscape(name)+"/exports", exportRequest{Client: client}, &v)
}

// RemoveExport takes an NFS client's access to a volume away.
func (c *Client) RemoveExport(ctx context.Context, name, client string) (v wire.Volume, err error) {
	return v, c.do(ctx, http.MethodDelete, "/v1/volumes/"+url.PathEscape(name)+"/exports/"+client, nil, &v)
}

// Stats is what GET /v1/stats returns.
type Stats struct {
	Filesystem struct {
		Size int64 `json:"sizeBytes"`
		Free int64 `json:"freeBytes"`
	} `json:"filesystem"`
}

// Stats returns the filesystem's size and free space.
func (c *Client) Stats(ctx context.Context) (s Stats, err error) {
	return s, c.do(ctx, http.MethodGet, "/v1/stats", nil, &s)
}

// WithoutTimeout is the client for a call that takes as long as its
// data, a sync: the same transport and trust, bounded by the caller's
// context instead of the client's per-call timeout.
func (c *Client) WithoutTimeout() *Client {
	long := *c
	long.HTTP = &http.Client{}
	if c.HTTP != nil {
		long.HTTP.Transport = c.HTTP.Transport
	}
	return &long
}

var _ mover.Agent = (*Client)(nil)
