package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
	"github.com/strata-gitops/strata/storage/images/bucket"
	"github.com/strata-gitops/strata/storage/images/cache"
)

// BucketImages reads images at S3 URLs, http(s)://<endpoint>/<bucket>/<object>
// (path-style, as MinIO serves them), with one access key, from the
// endpoints an admin allows only.
type BucketImages struct {
	AccessKey, SecretKey string
	Transport            http.RoundTripper
	// Endpoints are the S3 endpoints images may come from, as
	// scheme://host[:port]. The URL is a tenant's: without the list an
	// agent would request any address a tenant names, from the host
	// network, signed with its key. Empty allows none; AnyEndpoint in it
	// allows every one (a person running `strata image fill` by hand).
	Endpoints []string
}

// AnyEndpoint, in BucketImages.Endpoints, allows every endpoint.
const AnyEndpoint = "*"

// open returns the URL's bucket and object, refusing an endpoint off
// the list before any request, so that no credential goes there.
func (b BucketImages) open(imageURL string) (*bucket.Bucket, string, error) {
	endpoint, name, object, err := b.parse(imageURL)
	if err != nil {
		return nil, "", err
	}
	bk, err := bucket.Open(bucket.Options{Endpoint: endpoint, Bucket: name,
		AccessKey: b.AccessKey, SecretKey: b.SecretKey, Transport: b.Transport})
	return bk, object, err
}

// CheckURL refuses an image URL that names no object, or an endpoint off
// the list, as a job would, without a request: the image populator
// checks a VolumeImage before it makes a volume or starts a pod.
func (b BucketImages) CheckURL(imageURL string) error {
	_, _, _, err := b.parse(imageURL)
	return err
}

// parse splits an image URL into its endpoint, bucket and object, and
// refuses it when it names no object or an endpoint off the list.
func (b BucketImages) parse(imageURL string) (endpoint, name, object string, err error) {
	u, err := url.Parse(imageURL)
	if err != nil {
		return "", "", "", fmt.Errorf("image_url %q: %w", imageURL, err)
	}
	name, object, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok || name == "" || object == "" || u.User != nil {
		return "", "", "", fmt.Errorf("image_url %q names no object: give http(s)://<endpoint>/<bucket>/<object>", imageURL)
	}
	endpoint = strings.ToLower(u.Scheme + "://" + u.Host)
	if !b.allows(endpoint) {
		return "", "", "", fmt.Errorf("image_url %q: the endpoint %s is not one this node may fetch images from; its admin lists them in the chart value images.endpoints (--image-endpoints)", imageURL, endpoint)
	}
	return endpoint, name, object, nil
}

func (b BucketImages) allows(endpoint string) bool {
	for _, e := range b.Endpoints {
		if e == AnyEndpoint || strings.ToLower(strings.TrimSuffix(e, "/")) == endpoint {
			return true
		}
	}
	return false
}

// Source implements Images: the URL with a digest of the access key,
// never the key itself.
func (b BucketImages) Source(imageURL string) string {
	if b.AccessKey == "" {
		return imageURL + " anonymous"
	}
	sum := sha256.Sum256([]byte(b.AccessKey))
	return imageURL + " key-sha256:" + hex.EncodeToString(sum[:8])
}

// Digest implements Images.
func (b BucketImages) Digest(ctx context.Context, imageURL, declared string) (cache.Digest, error) {
	if declared != "" {
		return cache.ParseDigest(declared)
	}
	bk, object, err := b.open(imageURL)
	if err != nil {
		return "", err
	}
	text, err := bk.DeclaredChecksum(ctx, object)
	if err != nil {
		return "", err
	}
	d, err := cache.ParseDigest(text)
	if err != nil {
		return "", fmt.Errorf("%s%s: %w", imageURL, bucket.ChecksumSuffix, err)
	}
	return d, nil
}

// Size implements Images.
func (b BucketImages) Size(ctx context.Context, imageURL string) (int64, error) {
	bk, object, err := b.open(imageURL)
	if err != nil {
		return 0, err
	}
	return bk.Size(ctx, object)
}

// Copy implements Images.
func (b BucketImages) Copy(ctx context.Context, imageURL string, w io.Writer) error {
	bk, object, err := b.open(imageURL)
	if err != nil {
		return err
	}
	return bk.Copy(ctx, object, w)
}

// BtrfsVolumes are the tenants' btrfs volumes on the node, each holding
// its disk as the raw file DiskFile, as a VM on the host reads it. Store
// is the btrfs backend, reached through the storage contract: the image
// side imports no backend.
type BtrfsVolumes struct {
	Store contract.Volumes
}

// Create implements Volumes: the volume's disk is opened by OpenDisk,
// which follows nothing the tenant put in the volume.
func (b BtrfsVolumes) Create(ctx context.Context, tenant, name string, size int64) (*os.File, bool, error) {
	v, created, err := b.Store.Create(ctx, tenant, wire.CreateRequest{Name: name, SizeBytes: size})
	if err != nil {
		return nil, false, fmt.Errorf("volume %s: %w", name, err)
	}
	disk, err := OpenDisk(v.Path, size)
	return disk, created, err
}

// Delete implements Volumes.
func (b BtrfsVolumes) Delete(ctx context.Context, tenant, name string) error {
	return b.Store.Delete(ctx, tenant, name, false)
}
