package bucket

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/sourceignore"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/gittree"
	"github.com/strata-gitops/strata/sources/outcome"
)

// maxObjects bounds the objects one Bucket's artifact holds: a listing
// without end must not hold the controller's memory.
const maxObjects = 20000

// maxIgnoreFile bounds a .sourceignore read from a bucket.
const maxIgnoreFile = 64 << 10

// store is one bucket reached with the object's credentials.
type store struct {
	client *minio.Client
	bucket string
}

// connect reaches spec.endpoint with the keys of spec.secretRef (accesskey
// and secretkey, as Flux reads them), or anonymously without one.
func (r *Reconciler) connect(ctx context.Context, obj *sourcev1.Bucket) (*store, error) {
	creds := credentials.NewStaticV4("", "", "")
	if obj.Spec.SecretRef != nil {
		key := obj.Namespace + "/" + obj.Spec.SecretRef.Name
		secret, err := outcome.Secret(ctx, r, obj.Namespace, obj.Spec.SecretRef.Name, "spec.secretRef", "'accesskey' and 'secretkey'")
		if err != nil {
			return nil, err
		}
		access, secretKey := string(secret.Data["accesskey"]), string(secret.Data["secretkey"])
		if access == "" || secretKey == "" {
			return nil, fmt.Errorf("secret '%s' named in spec.secretRef needs both 'accesskey' and 'secretkey'", key)
		}
		creds = credentials.NewStaticV4(access, secretKey, "")
	}
	endpoint := obj.Spec.Endpoint
	if strings.Contains(endpoint, "://") {
		return nil, fmt.Errorf("spec.endpoint '%s' must be host[:port] without a scheme; set spec.insecure for plain http", endpoint)
	}
	c, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: !obj.Spec.Insecure, Region: obj.Spec.Region, Transport: r.Transport})
	if err != nil {
		return nil, fmt.Errorf("spec.endpoint '%s': %w", endpoint, err)
	}
	return &store{client: c, bucket: obj.Spec.BucketName}, nil
}

// listing is the objects of an artifact and their ETags.
type listing struct {
	files []artifact.File
	etags map[string]string
}

// revision is Flux's: the SHA-256 of "key etag\n" for every key, sorted.
func (l listing) revision() string {
	keys := make([]string, 0, len(l.etags))
	for k := range l.etags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s %s\n", k, l.etags[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// list lists the objects under prefix that belong in the artifact, by
// Flux's exclusion rules, the bucket's .sourceignore and spec.ignore. No
// object is read but the .sourceignore: files open their object when the
// artifact is stored.
func (s *store) list(ctx context.Context, prefix string, ignore *string, limits artifact.Limits) (listing, error) {
	exists, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return listing{}, fmt.Errorf("reaching bucket '%s': %w", s.bucket, err)
	}
	if !exists {
		return listing{}, fmt.Errorf("bucket '%s' does not exist at this endpoint: check spec.bucketName", s.bucket)
	}
	var files []artifact.File
	etags := map[string]string{}
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return listing{}, fmt.Errorf("listing bucket '%s': %w", s.bucket, o.Err)
		}
		if strings.HasSuffix(o.Key, "/") {
			continue
		}
		name, err := artifact.CleanName(o.Key)
		if err != nil {
			return listing{}, fmt.Errorf("bucket '%s': %w", s.bucket, err)
		}
		if limits.File > 0 && o.Size > limits.File {
			return listing{}, fmt.Errorf("bucket '%s': object %s is %d bytes, over the limit of %d per file: keep it out with spec.ignore", s.bucket, o.Key, o.Size, limits.File)
		}
		if len(files) == maxObjects {
			return listing{}, fmt.Errorf("bucket '%s' holds over %d objects under '%s': narrow it with spec.prefix or spec.ignore", s.bucket, maxObjects, prefix)
		}
		files = append(files, s.object(ctx, o.Key, name))
		etags[name] = o.ETag
	}
	if _, listed := etags[sourceignore.IgnoreFile]; !listed {
		// Outside spec.prefix: Flux reads the bucket's top .sourceignore
		// whatever the prefix.
		if ignore, err = s.withTopIgnore(ctx, ignore); err != nil {
			return listing{}, err
		}
	}
	kept, err := gittree.Selected(files, ignore)
	if err != nil {
		return listing{}, fmt.Errorf("bucket '%s': %w", s.bucket, err)
	}
	keptTags := make(map[string]string, len(kept))
	for _, f := range kept {
		keptTags[f.Path] = etags[f.Path]
	}
	return listing{files: kept, etags: keptTags}, nil
}

// withTopIgnore is spec.ignore after the patterns of the bucket's top
// .sourceignore, when it has one.
func (s *store) withTopIgnore(ctx context.Context, ignore *string) (*string, error) {
	o, err := s.client.GetObject(ctx, s.bucket, sourceignore.IgnoreFile, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s of bucket '%s': %w", sourceignore.IgnoreFile, s.bucket, err)
	}
	defer o.Close()
	data, err := io.ReadAll(&limited{o, maxIgnoreFile})
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return ignore, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s of bucket '%s': %w", sourceignore.IgnoreFile, s.bucket, err)
	}
	patterns := string(data) + "\n"
	if ignore != nil {
		patterns += *ignore
	}
	return &patterns, nil
}

// object is the file of one object, read when opened.
func (s *store) object(ctx context.Context, key, name string) artifact.File {
	return artifact.File{Path: name, Open: func() (io.ReadCloser, error) {
		o, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading object %s of bucket '%s': %w", key, s.bucket, err)
		}
		if name == sourceignore.IgnoreFile || strings.HasSuffix(name, "/"+sourceignore.IgnoreFile) {
			return &limited{o, maxIgnoreFile}, nil
		}
		return o, nil
	}}
}

// limited reads at most n bytes, then fails: an ignore file read whole
// before anything is stored must not be a way to fill memory.
type limited struct {
	io.ReadCloser
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.ReadCloser.Read(p)
	if l.n -= int64(n); l.n < 0 {
		return 0, errors.New("a .sourceignore over 64 KiB")
	}
	return n, err
}
