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

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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

// waitFor polls the OCIRepository until check accepts it.
func (f *fixture) waitFor(t *testing.T, name string, check func(obj *sourcev1.OCIRepository, ready *metav1.Condition) error) *sourcev1.OCIRepository {
	t.Helper()
	obj := &sourcev1.OCIRepository{}
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, obj); err != nil {
			return err
		}
		return check(obj, apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition))
	})
	return obj
}

func (f *fixture) waitRevision(t *testing.T, name, revision string) *sourcev1.OCIRepository {
	t.Helper()
	return f.waitFor(t, name, func(obj *sourcev1.OCIRepository, ready *metav1.Condition) error {
		if obj.Status.Artifact == nil || obj.Status.Artifact.Revision != revision || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("want ready at %s, have artifact %+v, conditions %+v", revision, obj.Status.Artifact, obj.Status.Conditions)
		}
		return nil
	})
}

// waitFailure waits for Ready=False with reason and a message holding want.
func (f *fixture) waitFailure(t *testing.T, name, reason, want string) *sourcev1.OCIRepository {
	t.Helper()
	return f.waitFor(t, name, func(obj *sourcev1.OCIRepository, ready *metav1.Condition) error {
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != reason || !strings.Contains(ready.Message, want) {
			return fmt.Errorf("want Ready=False/%s with %q, have %+v", reason, want, obj.Status.Conditions)
		}
		return nil
	})
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
