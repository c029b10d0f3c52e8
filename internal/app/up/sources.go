package up

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/strata-gitops/strata/internal/local/cluster"
	"github.com/strata-gitops/strata/internal/local/objectstore"
	"github.com/strata-gitops/strata/internal/local/ociartifact"
)

// The example repository's other sources: an OCI artifact in the
// cluster's registry and objects in a bucket of a MinIO on the host, both
// made from clusters/homelab-sources (docs/sources.md).
const (
	sourcesDir    = "clusters/homelab-sources"
	minioPort     = "9000"
	minioConsole  = "9001"
	bucketName    = "homelab"
	bucketAccess  = "homelab"
	ociRepository = "homelab/settings"
)

// demoSources serves the example repository's OCIRepository and Bucket:
// it pushes clusters/homelab-sources/oci as a Flux artifact and writes
// the Secret of the bucket's keys and the ConfigMap of both addresses,
// which the sources Kustomization substitutes; both are known before
// MinIO runs. MinIO itself starts once built (make up leaves its build
// to strata up, beside the cluster's start), in the background: it gets
// clusters/homelab-sources/bucket in a bucket, and the Bucket source is
// asked to fetch again. A failure there is passed to fail, which ends
// strata up's watch of the example with it: the Bucket would never be
// Ready. stop ends MinIO.
func demoSources(ctx context.Context, cl client.Client, o Options, c *cluster.Cluster, built *laterBuild, fail func(error), say func(string, ...any)) (stop func(), err error) {
	root := filepath.Join(o.Root, sourcesDir)
	if _, err := ociartifact.PushDir(ctx, c.Registry()+"/"+ociRepository+":latest", filepath.Join(root, "oci"), "strata up", "local"); err != nil {
		return nil, fmt.Errorf("pushing %s/oci to the cluster's registry: %w", sourcesDir, err)
	}
	dir := filepath.Join(o.StateDir, "minio")
	secret, err := bucketSecret(dir)
	if err != nil {
		return nil, err
	}
	endpoint := net.JoinHostPort(c.HostIP().String(), minioPort)
	if err := sourceSettings(ctx, cl, c.Registry(), endpoint, secret); err != nil {
		return nil, err
	}
	return serveLater(func() (*objectstore.Server, error) {
		return serveBucket(ctx, cl, o, built, endpoint, secret, say)
	}, func(err error) { fail(fmt.Errorf("the example's Bucket: %w", err)) }), nil
}

// serveLater starts a server in the background once serve can (serve
// waits for what it needs, such as a later build), and passes serve's
// error to fail. stop waits for serve and stops the server.
func serveLater(serve func() (*objectstore.Server, error), fail func(error)) (stop func()) {
	var srv *objectstore.Server
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if srv, err = serve(); err != nil {
			fail(err)
		}
	}()
	return func() {
		<-done
		if srv != nil {
			srv.Stop()
		}
	}
}

// serveBucket starts MinIO once it is built, fills the bucket and asks
// the Bucket source to fetch it.
func serveBucket(ctx context.Context, cl client.Client, o Options, built *laterBuild, endpoint, secret string, say func(string, ...any)) (*objectstore.Server, error) {
	if err := built.wait(ctx, say); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(endpoint)
	dir := filepath.Join(o.StateDir, "minio")
	srv, err := objectstore.Start(ctx, filepath.Join(o.Bin, "minio"), dir, endpoint,
		net.JoinHostPort(host, minioConsole), filepath.Join(dir, "minio.log"), bucketAccess, secret)
	if err != nil {
		return nil, err
	}
	if err := fillBucket(ctx, srv, filepath.Join(o.Root, sourcesDir, "bucket")); err != nil {
		srv.Stop()
		return nil, err
	}
	// Its fetches failed while MinIO was not there, and its next retry
	// may be minutes away: ask, as `flux reconcile source bucket` does.
	bucket := &sourcev1.Bucket{ObjectMeta: metav1.ObjectMeta{Name: "homelab-settings", Namespace: fluxNamespace}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
	if err := cl.Patch(ctx, bucket, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
		srv.Stop()
		return nil, err
	}
	say("MinIO serves the example's bucket at %s", endpoint)
	return srv, nil
}

// bucketSecret is MinIO's root secret, made once and kept with the state.
func bucketSecret(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "secret")
	if data, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(data)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	secret := hex.EncodeToString(b)
	return secret, os.WriteFile(path, []byte(secret+"\n"), 0o600)
}

// fillBucket puts the files under dir in the bucket, made if missing.
func fillBucket(ctx context.Context, srv *objectstore.Server, dir string) error {
	s3, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, "")})
	if err != nil {
		return err
	}
	exists, err := s3.BucketExists(ctx, bucketName)
	if err != nil {
		return fmt.Errorf("MinIO at %s: %w", srv.Endpoint, err)
	}
	if !exists {
		if err := s3.MakeBucket(ctx, bucketName, minio.MakeBucketOptions{}); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		_, err = s3.PutObject(ctx, bucketName, filepath.ToSlash(rel), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	})
}

// sourceSettings writes flux-system/homelab-bucket (the bucket's keys, as
// a Bucket's secretRef takes them) and flux-system/homelab-sources (the
// registry's and MinIO's addresses, for postBuild substitution).
func sourceSettings(ctx context.Context, cl client.Client, registry, bucketEndpoint, secret string) error {
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "homelab-bucket", Namespace: fluxNamespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, cl, keys, func() error {
		keys.Data = map[string][]byte{"accesskey": []byte(bucketAccess), "secretkey": []byte(secret)}
		return nil
	}); err != nil {
		return err
	}
	addrs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "homelab-sources", Namespace: fluxNamespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, cl, addrs, func() error {
		addrs.Data = map[string]string{"registry": registry, "bucket_endpoint": bucketEndpoint}
		return nil
	})
	return err
}
