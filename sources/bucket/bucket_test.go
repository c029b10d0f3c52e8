package bucket_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/bucket"
)

type fixture struct {
	env     *testenv.Env
	storage *artifact.Storage
	minio   testenv.MinIO
	s3      *minio.Client
	ns      string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Get(t)
	m := testenv.StartMinIO(t)
	s3, err := minio.New(strings.TrimPrefix(m.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	storage, err := artifact.NewStorage(filepath.Join(t.TempDir(), "artifacts"), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return (&bucket.Reconciler{Client: mgr.GetClient(), Storage: storage, Events: mgr.GetEventRecorder("strata")}).SetupWithManager(mgr, 2)
	})
	ns := fmt.Sprintf("bucket-%d-%d", os.Getpid(), time.Now().UnixNano()%100000)
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns},
		StringData: map[string]string{"accesskey": m.AccessKey, "secretkey": m.SecretKey}}
	if err := env.Client.Create(context.Background(), keys); err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, storage: storage, minio: m, s3: s3, ns: ns}
}

func (f *fixture) put(t *testing.T, bucketName string, objects map[string]string) {
	t.Helper()
	ctx := context.Background()
	if ok, err := f.s3.BucketExists(ctx, bucketName); err != nil {
		t.Fatal(err)
	} else if !ok {
		if err := f.s3.MakeBucket(ctx, bucketName, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for key, data := range objects {
		if _, err := f.s3.PutObject(ctx, bucketName, key, bytes.NewReader([]byte(data)), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// fluxRevision computes Flux's Bucket revision from MinIO's own listing:
// the SHA-256 of "key etag\n" over the kept keys, sorted.
func (f *fixture) fluxRevision(t *testing.T, bucketName string, kept ...string) string {
	t.Helper()
	etags := map[string]string{}
	for o := range f.s3.ListObjects(context.Background(), bucketName, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		etags[o.Key] = o.ETag
	}
	sort.Strings(kept)
	h := sha256.New()
	for _, k := range kept {
		fmt.Fprintf(h, "%s %s\n", k, etags[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func (f *fixture) create(t *testing.T, name, bucketName string, mutate func(*sourcev1.Bucket)) *sourcev1.Bucket {
	t.Helper()
	obj := &sourcev1.Bucket{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: sourcev1.BucketSpec{
			Provider: sourcev1.BucketProviderGeneric, BucketName: bucketName, Insecure: true,
			Endpoint: strings.TrimPrefix(f.minio.Endpoint, "http://"), SecretRef: &meta.LocalObjectReference{Name: "keys"},
			Interval: metav1.Duration{Duration: time.Hour},
		},
	}
	if mutate != nil {
		mutate(obj)
	}
	if err := f.env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func (f *fixture) waitRevision(t *testing.T, name, revision string) *sourcev1.Bucket {
	t.Helper()
	return testenv.WaitSourceRevision(t, f.env.Client, client.ObjectKey{Namespace: f.ns, Name: name}, &sourcev1.Bucket{}, revision)
}

func (f *fixture) waitFailure(t *testing.T, name, reason, want string) *sourcev1.Bucket {
	t.Helper()
	return testenv.WaitSourceFailure(t, f.env.Client, client.ObjectKey{Namespace: f.ns, Name: name}, &sourcev1.Bucket{}, reason, want)
}

// The objects under spec.prefix, less what the bucket's .sourceignore and
// spec.ignore leave out, are the artifact, at Flux's revision; a changed
// object is the next revision, and an unchanged bucket keeps its artifact.
func TestABucketIsItsObjectsAtFluxsRevision(t *testing.T) {
	f := setup(t)
	f.put(t, "infra", map[string]string{
		".sourceignore":        "*.bak\n",
		"clusters/a/apps.yaml": "kind: ConfigMap\n",
		"clusters/a/old.bak":   "left out by .sourceignore\n",
		"clusters/a/README.md": "left out by spec.ignore\n",
		"elsewhere/x.yaml":     "outside the prefix\n",
	})
	f.create(t, "infra", "infra", func(b *sourcev1.Bucket) {
		b.Spec.Prefix = "clusters/"
		ignore := "*.md\n"
		b.Spec.Ignore = &ignore
	})
	rev := f.fluxRevision(t, "infra", "clusters/a/apps.yaml")
	obj := f.waitRevision(t, "infra", rev)
	dir, err := f.storage.Dir(obj.Status.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	files, err := testenv.ReadTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files["clusters/a/apps.yaml"] != "kind: ConfigMap\n" {
		t.Fatalf("artifact files %v; want clusters/a/apps.yaml alone", files)
	}
	first := obj.Status.Artifact.Digest
	testenv.RequestReconcile(t, f.env.Client, obj)
	obj = testenv.WaitSource(t, f.env.Client, client.ObjectKeyFromObject(obj), &sourcev1.Bucket{}, func(b *sourcev1.Bucket, _ *metav1.Condition) error {
		if b.Status.LastHandledReconcileAt == "" {
			return fmt.Errorf("request not handled yet")
		}
		return nil
	})
	if obj.Status.Artifact.Digest != first {
		t.Fatalf("an unchanged bucket stored a new artifact")
	}
	if out := testenv.Flux(t, f.env, "get", "sources", "bucket", "-n", f.ns); !strings.Contains(out, testenv.FluxShort(rev)) || !strings.Contains(out, "True") {
		t.Fatalf("flux get sources bucket does not show the ready revision:\n%s", out)
	}
	f.put(t, "infra", map[string]string{"clusters/a/apps.yaml": "kind: Secret\n"})
	next := f.fluxRevision(t, "infra", "clusters/a/apps.yaml")
	if out := testenv.Flux(t, f.env, "reconcile", "source", "bucket", "infra", "-n", f.ns); !strings.Contains(out, testenv.FluxShort(next)) {
		t.Fatalf("flux reconcile source bucket does not report the new revision %s:\n%s", next, out)
	}
	f.waitRevision(t, "infra", next)
}

// Refusals name what to fix, and store nothing.
func TestBucketRefusals(t *testing.T) {
	f := setup(t)
	f.put(t, "infra", map[string]string{"a.yaml": "a"})
	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong", Namespace: f.ns},
		StringData: map[string]string{"accesskey": f.minio.AccessKey, "secretkey": "not-the-key"}}
	if err := f.env.Client.Create(context.Background(), wrong); err != nil {
		t.Fatal(err)
	}
	f.create(t, "aws", "infra", func(b *sourcev1.Bucket) { b.Spec.Provider = sourcev1.BucketProviderAmazon })
	f.create(t, "missing", "no-such-bucket", nil)
	f.create(t, "wrong-key", "infra", func(b *sourcev1.Bucket) { b.Spec.SecretRef.Name = "wrong" })
	cases := []struct{ name, reason, want string }{
		{"aws", status.UnsupportedFieldReason, "spec.provider 'aws' is not served"},
		{"missing", sourcev1.BucketOperationFailedReason, "bucket 'no-such-bucket' does not exist"},
		{"wrong-key", sourcev1.BucketOperationFailedReason, "signature we calculated does not match"},
	}
	for _, c := range cases {
		if obj := f.waitFailure(t, c.name, c.reason, c.want); obj.Status.Artifact != nil {
			t.Fatalf("%s stored an artifact", c.name)
		}
	}
}
