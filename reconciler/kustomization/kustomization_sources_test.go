package kustomization_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/app/manager"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// fromSource points a Kustomization at a source of another kind.
func fromSource(kind, name string) func(*kustomizev1.Kustomization) {
	return func(ks *kustomizev1.Kustomization) {
		ks.Spec.SourceRef = kustomizev1.CrossNamespaceSourceReference{Kind: kind, Name: name}
	}
}

// A Kustomization builds from an OCIRepository (an artifact flux push
// artifact made) and from a Bucket (objects in the real MinIO) as from a
// GitRepository: Ready at the source's revision, the objects applied.
func TestKustomizationsBuildFromOCIAndBucketSources(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	digest := testenv.FluxPushArtifact(t, host+"/manifests:v1", map[string]string{"apps/cm.yaml": configMap("from-oci")})
	oci := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "manifests", Namespace: s.ns, Labels: s.labels()},
		Spec: sourcev1.OCIRepositorySpec{URL: "oci://" + host + "/manifests", Insecure: true,
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"}, Interval: metav1.Duration{Duration: time.Hour}},
	}
	m := testenv.StartMinIO(t)
	m.Put(t, "manifests", map[string][]byte{"apps/cm.yaml": []byte(configMap("from-bucket"))})
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: s.ns},
		StringData: map[string]string{"accesskey": m.AccessKey, "secretkey": m.SecretKey}}
	bucket := &sourcev1.Bucket{
		ObjectMeta: metav1.ObjectMeta{Name: "manifests", Namespace: s.ns, Labels: s.labels()},
		Spec: sourcev1.BucketSpec{BucketName: "manifests", Endpoint: strings.TrimPrefix(m.Endpoint, "http://"), Insecure: true,
			SecretRef: &meta.LocalObjectReference{Name: "s3"}, Interval: metav1.Duration{Duration: time.Hour}},
	}
	for _, o := range []client.Object{oci, keys, bucket} {
		if err := s.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s.kustomization("from-oci", "./apps", fromSource(sourcev1.OCIRepositoryKind, "manifests"))
	s.kustomization("from-bucket", "./apps", fromSource(sourcev1.BucketKind, "manifests"))
	s.waitReady("from-oci", "v1@"+digest)
	ks := s.waitCondition("from-bucket", meta.ReadyCondition, metav1.ConditionTrue, meta.ReconciliationSucceededReason)
	if !strings.HasPrefix(ks.Status.LastAppliedRevision, "sha256:") {
		t.Fatalf("the Bucket's Kustomization applied revision %q, want the listing's digest", ks.Status.LastAppliedRevision)
	}
	for _, name := range []string{"from-oci", "from-bucket"} {
		if !s.exists(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}}) {
			t.Fatalf("ConfigMap %s was not applied", name)
		}
	}
	next := testenv.FluxPushArtifact(t, host+"/manifests:v1", map[string]string{"apps/cm.yaml": configMap("from-oci", "pushed", "again")})
	s.request(oci)
	s.waitReady("from-oci", "v1@"+next)
}

// With strata's own sources off, the GitRepository is Flux's real
// source-controller's: strata's engine downloads its artifact from the
// address the status names, checks its digest, and applies it.
func TestAKustomizationBuildsFromFluxsSourceController(t *testing.T) {
	var fluxAddr string
	s := newStack(t, func(o *manager.Options) {
		o.ServeSources = false
		o.RemoteArtifactHosts = []string{fluxAddr}
	})
	s.stopController()
	fluxAddr = testenv.FluxSourceController(t, s.env, "strata.dev/test="+s.ns)
	s.startController()
	rev := s.push(map[string]string{"apps/cm.yaml": configMap("from-flux")})
	s.source(rev)
	s.kustomization("apps", "./apps", nil)
	s.waitReady("apps", rev)
	if !s.exists(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-flux", Namespace: s.ns}}) {
		t.Fatal("the ConfigMap from Flux's artifact was not applied")
	}
}

// An ExternalArtifact is whatever its producer wrote in status: strata
// downloads it only from an allowed host and uses it only when its digest
// is the one the status names.
func TestExternalArtifactsAreCheckedBeforeUse(t *testing.T) {
	tarball := gzippedTar(t, map[string]string{"apps/cm.yaml": configMap("external")})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data.tar.gz", http.StatusFound)
			return
		}
		_, _ = w.Write(tarball)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	s := newStack(t, func(o *manager.Options) { o.RemoteArtifactHosts = []string{host} })
	sum := sha256.Sum256(tarball)
	good := "sha256:" + hex.EncodeToString(sum[:])
	external := func(name, url, digest string) {
		ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: s.labels()}}
		if err := s.c.Create(context.Background(), ea); err != nil {
			t.Fatal(err)
		}
		ea.Status.Artifact = &meta.Artifact{Path: "x.tar.gz", URL: url, Revision: "v1@" + digest, Digest: digest,
			LastUpdateTime: metav1.Now()}
		if err := s.c.Status().Update(context.Background(), ea); err != nil {
			t.Fatal(err)
		}
		s.kustomization(name, "./apps", fromSource(sourcev1.ExternalArtifactKind, name))
	}
	external("good", srv.URL+"/a.tar.gz", good)
	external("tampered", srv.URL+"/a.tar.gz", "sha256:"+strings.Repeat("0", 64))
	external("elsewhere", "http://169.254.169.254/latest/meta-data.tar.gz", good)
	external("redirected", srv.URL+"/redirect", good)
	// An ExternalArtifact whose status names another source's artifact in
	// strata's own storage (another tenant's repository) is not read from it.
	rev := s.push(map[string]string{"apps/cm.yaml": configMap("private")})
	s.source(rev)
	repo := &sourcev1.GitRepository{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "flux-system"}, repo); err != nil {
		t.Fatal(err)
	}
	borrowed := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "borrowed", Namespace: s.ns, Labels: s.labels()}}
	if err := s.c.Create(context.Background(), borrowed); err != nil {
		t.Fatal(err)
	}
	borrowed.Status.Artifact = repo.Status.Artifact.DeepCopy()
	if err := s.c.Status().Update(context.Background(), borrowed); err != nil {
		t.Fatal(err)
	}
	s.kustomization("borrowed", "./apps", fromSource(sourcev1.ExternalArtifactKind, "borrowed"))
	s.waitReady("good", "v1@"+good)
	s.waitCondition("tampered", meta.ReadyCondition, metav1.ConditionFalse, meta.ArtifactFailedReason, "not sha256:0000", "nothing of it is used")
	s.waitCondition("elsewhere", meta.ReadyCondition, metav1.ConditionFalse, meta.ArtifactFailedReason, "host '169.254.169.254' is not one strata downloads artifacts from")
	s.waitCondition("redirected", meta.ReadyCondition, metav1.ConditionFalse, meta.ArtifactFailedReason, "host '169.254.169.254' is not one strata downloads artifacts from")
	s.waitCondition("borrowed", meta.ReadyCondition, metav1.ConditionFalse, meta.ArtifactFailedReason, "is not one strata downloads artifacts from")
	if s.exists(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "private"}}) {
		t.Fatal("an ExternalArtifact applied another source's artifact from strata's storage")
	}
}

func gzippedTar(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
