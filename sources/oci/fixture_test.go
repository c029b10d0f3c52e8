package oci_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/oci"
)

type fixture struct {
	env     *testenv.Env
	storage *artifact.Storage
	ns      string
	// host is the loopback registry's host:port.
	host string
}

var nsCounter int

// setup starts a registry on loopback (go-containerregistry's, wrapped by
// wrap when given) and the reconciler.
func setup(t *testing.T, wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	env := testenv.Get(t)
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	storage, err := artifact.NewStorage(filepath.Join(t.TempDir(), "artifacts"), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		return (&oci.Reconciler{Client: mgr.GetClient(), Storage: storage, Events: mgr.GetEventRecorder("strata")}).SetupWithManager(mgr, 2)
	})
	nsCounter++
	ns := fmt.Sprintf("oci-%d-%d", os.Getpid(), nsCounter)
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, storage: storage, ns: ns, host: strings.TrimPrefix(srv.URL, "http://")}
}

// push pushes files as an artifact with `flux push artifact`, as users
// do, and returns its digest.
func (f *fixture) push(t *testing.T, ref string, files map[string]string, extra ...string) string {
	t.Helper()
	return testenv.FluxPushArtifact(t, f.host+"/"+ref, files, extra...)
}

func (f *fixture) create(t *testing.T, name, repo string, mutate func(*sourcev1.OCIRepository)) *sourcev1.OCIRepository {
	t.Helper()
	obj := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL:      "oci://" + f.host + "/" + repo,
			Interval: metav1.Duration{Duration: time.Hour},
			Insecure: true,
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

func (f *fixture) waitRevision(t *testing.T, name, revision string) *sourcev1.OCIRepository {
	t.Helper()
	return testenv.WaitSourceRevision(t, f.env.Client, client.ObjectKey{Namespace: f.ns, Name: name}, &sourcev1.OCIRepository{}, revision)
}

func (f *fixture) waitFailure(t *testing.T, name, reason, want string) *sourcev1.OCIRepository {
	t.Helper()
	return testenv.WaitSourceFailure(t, f.env.Client, client.ObjectKey{Namespace: f.ns, Name: name}, &sourcev1.OCIRepository{}, reason, want)
}

func (f *fixture) artifactFiles(t *testing.T, obj *sourcev1.OCIRepository) map[string]string {
	t.Helper()
	dir, err := f.storage.Dir(obj.Status.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	files, err := testenv.ReadTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
