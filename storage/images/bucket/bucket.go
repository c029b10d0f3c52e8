// Package bucket reads VM disk images and their checksums from an S3
// bucket (MinIO or any S3 API) with minio-go.
package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Options say where a bucket is and how to sign in.
type Options struct {
	// Endpoint is the S3 API's URL, http:// or https://.
	Endpoint string
	Bucket   string
	// AccessKey and SecretKey come from a Secret; both empty reads a
	// public bucket anonymously.
	AccessKey, SecretKey string
	// Transport, when set, carries the requests: a client trusting a
	// private CA, say.
	Transport http.RoundTripper
}

// Bucket is one bucket of one S3 API.
type Bucket struct {
	client *minio.Client
	name   string
	url    string
}

// Open checks the options and returns the bucket; it does not call the
// server.
func Open(o Options) (*Bucket, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("S3 endpoint %q is not an http(s) URL", o.Endpoint)
	}
	if o.Bucket == "" {
		return nil, errors.New("no bucket named: give the bucket the images are in")
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(o.AccessKey, o.SecretKey, ""),
		Secure:    u.Scheme == "https",
		Transport: o.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %s: %w", o.Endpoint, err)
	}
	return &Bucket{client: client, name: o.Bucket, url: strings.TrimSuffix(o.Endpoint, "/") + "/" + o.Bucket}, nil
}

// Copy writes object's bytes, as stored, to w. A download cut short is
// an error, never a short copy: minio-go checks the length the server
// announced.
func (b *Bucket) Copy(ctx context.Context, object string, w io.Writer) error {
	obj, err := b.client.GetObject(ctx, b.name, object, minio.GetObjectOptions{})
	if err != nil {
		return b.describe(object, err)
	}
	defer obj.Close()
	if _, err := io.Copy(w, obj); err != nil {
		return b.describe(object, err)
	}
	return nil
}

// Size is object's size in bytes.
func (b *Bucket) Size(ctx context.Context, object string) (int64, error) {
	info, err := b.client.StatObject(ctx, b.name, object, minio.StatObjectOptions{})
	if err != nil {
		return 0, b.describe(object, err)
	}
	return info.Size, nil
}

// ChecksumSuffix names the object beside an image that holds its
// SHA-256, as sha256sum writes it.
const ChecksumSuffix = ".sha256"

// DeclaredChecksum reads the SHA-256 object beside object: its text,
// for the caller to parse. A missing one is ErrNoChecksum.
func (b *Bucket) DeclaredChecksum(ctx context.Context, object string) (string, error) {
	var text strings.Builder
	err := b.Copy(ctx, object+ChecksumSuffix, &limited{w: &text, left: 4 << 10})
	if minio.ToErrorResponse(errors.Unwrap(err)).Code == "NoSuchKey" {
		return "", fmt.Errorf("%w: %s/%s%s is missing; put it beside the image, or declare the digest in the image source",
			ErrNoChecksum, b.url, object, ChecksumSuffix)
	}
	return text.String(), err
}

// ErrNoChecksum is an image with no SHA-256 object beside it.
var ErrNoChecksum = errors.New("no checksum for the image")

// describe names the object in an error of the S3 API.
func (b *Bucket) describe(object string, err error) error {
	return fmt.Errorf("%s/%s: %w", b.url, object, err)
}

// limited refuses more than left bytes: a checksum object is a line.
type limited struct {
	w    io.Writer
	left int
}

func (l *limited) Write(p []byte) (int, error) {
	if len(p) > l.left {
		return 0, errors.New("larger than a checksum line")
	}
	l.left -= len(p)
	return l.w.Write(p)
}
