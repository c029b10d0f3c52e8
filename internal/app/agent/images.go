package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/storage/agent/volumeapi"
	"github.com/strata-gitops/strata/storage/images/cache"
	"github.com/strata-gitops/strata/storage/images/provision"
	"github.com/strata-gitops/strata/storage/images/qemuimg"
)

// ImageOptions turn image jobs on (docs/images.md).
type ImageOptions struct {
	// Dir holds the image cache (cache/) and the jobs' records (jobs/);
	// empty serves no image jobs.
	Dir string
	// CacheBytes bounds the cache; 0 leaves it unbounded.
	CacheBytes  int64
	Concurrency int
	// CredentialsSecret is namespace/name of a Secret whose accessKey
	// and secretKey sign bucket requests; empty reads buckets
	// anonymously.
	CredentialsSecret string
	// Endpoints are the S3 endpoints image URLs may name; none allows
	// none (provision.BucketImages).
	Endpoints []string
}

// open opens the cache and the jobs, which fill volumes, resuming those a
// stop interrupted.
func (o ImageOptions) open(ctx context.Context, c client.Reader, volumes provision.Volumes, notice func(reason, message string)) (*provision.Provisioner, error) {
	images, err := o.credentials(ctx, c)
	if err != nil {
		return nil, err
	}
	cached, err := cache.Open(filepath.Join(o.Dir, "cache"), o.CacheBytes)
	if err != nil {
		return nil, err
	}
	return provision.Open(ctx, provision.Options{Dir: filepath.Join(o.Dir, "jobs"), Cache: cached, Images: images,
		Volumes: volumes, Tool: qemuimg.New(), Concurrency: o.Concurrency, Notice: notice})
}

// credentials reads the bucket credentials from their Secret.
func (o ImageOptions) credentials(ctx context.Context, c client.Reader) (provision.BucketImages, error) {
	key, err := volumeapi.SecretKey("image-credentials-secret", o.CredentialsSecret)
	if err != nil || key.Name == "" {
		return provision.BucketImages{Endpoints: o.Endpoints}, err
	}
	if c == nil {
		return provision.BucketImages{}, fmt.Errorf("--image-credentials-secret needs a Kubernetes API: set --kubeconfig or run in a cluster")
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return provision.BucketImages{}, fmt.Errorf("image credentials Secret %s: %w", key, err)
	}
	access, secret := strings.TrimSpace(string(s.Data["accessKey"])), strings.TrimSpace(string(s.Data["secretKey"]))
	if access == "" || secret == "" {
		return provision.BucketImages{}, fmt.Errorf("image credentials Secret %s needs both accessKey and secretKey", key)
	}
	return provision.BucketImages{AccessKey: access, SecretKey: secret, Endpoints: o.Endpoints}, nil
}
