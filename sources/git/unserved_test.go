package git_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// TestUnservedFieldsAreRefused: a field whose absence would make a wrong
// artifact (lacking files Kustomizations then prune) stops the fetch with a
// message that names it.
func TestUnservedFieldsAreRefused(t *testing.T) {
	f := setup(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "unserved")
	repo.CommitAndPush("one", map[string]string{"a.yaml": "a: 1\n"})
	for name, c := range map[string]struct {
		mutate   func(*sourcev1.GitRepository)
		fragment string
	}{
		"provider": {func(o *sourcev1.GitRepository) { o.Spec.Provider = sourcev1.GitProviderGitHub }, "spec.provider 'github'"},
	} {
		f.create(t, name, repo.URL, c.mutate)
		obj := f.waitFailure(t, name, status.UnsupportedFieldReason)
		if msg := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition).Message; !strings.Contains(msg, c.fragment) {
			t.Errorf("%s: message %q does not name %s", name, msg, c.fragment)
		}
		if obj.Status.Artifact != nil {
			t.Errorf("%s: an artifact was made: %+v", name, obj.Status.Artifact)
		}
	}
}

// TestSparseCheckout: only the listed directories are in the artifact,
// and changing the list makes a new one.
func TestSparseCheckout(t *testing.T) {
	f := setup(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "sparse")
	c := repo.CommitAndPush("files", map[string]string{
		"clusters/prod/a.yaml": "a: 1\n", "apps/b.yaml": "b: 1\n", "apps-extra/c.yaml": "c: 1\n", "top.yaml": "t: 1\n",
	})
	obj := f.create(t, "sparse", repo.URL, func(o *sourcev1.GitRepository) { o.Spec.SparseCheckout = []string{"./clusters/prod", "apps/"} })
	in := func(want map[string]bool) {
		t.Helper()
		got := f.waitRevision(t, obj.Name, "main@sha1:"+c)
		dir, err := f.storage.Dir(got.Status.Artifact)
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range want {
			if _, err := os.Stat(filepath.Join(dir, path)); (err == nil) != want {
				t.Errorf("%s in the artifact = %v, want %v", path, err == nil, want)
			}
		}
	}
	in(map[string]bool{"clusters/prod/a.yaml": true, "apps/b.yaml": true, "apps-extra/c.yaml": false, "top.yaml": false})
	before := f.waitRevision(t, obj.Name, "main@sha1:"+c).Status.Artifact.Digest
	everything := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"sparseCheckout":null}}`))
	if err := f.env.Client.Patch(t.Context(), obj, everything); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, obj.Name, func(o *sourcev1.GitRepository, _ *metav1.Condition) error {
		if o.Status.Artifact == nil || o.Status.Artifact.Digest == before {
			return fmt.Errorf("artifact still %+v", o.Status.Artifact)
		}
		return nil
	})
	in(map[string]bool{"apps-extra/c.yaml": true, "top.yaml": true})
}
