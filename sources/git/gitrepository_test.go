package git_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/sources/artifact"
	"github.com/strata-gitops/strata/sources/git"
)

type fixture struct {
	env     *testenv.Env
	storage *artifact.Storage
	ns      string
}

var nsCounter int

func setup(t *testing.T, tweaks ...func(*git.Reconciler)) *fixture {
	t.Helper()
	env := testenv.Get(t)
	dir := t.TempDir()
	storage, err := artifact.NewStorage(filepath.Join(dir, "artifacts"), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, env, func(mgr manager.Manager) error {
		r := &git.Reconciler{Client: mgr.GetClient(), Storage: storage, Events: mgr.GetEventRecorder("strata"), MirrorDir: filepath.Join(dir, "mirrors")}
		for _, tweak := range tweaks {
			tweak(r)
		}
		return r.SetupWithManager(mgr, 2)
	})
	nsCounter++
	ns := fmt.Sprintf("git-%d-%d", os.Getpid(), nsCounter)
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, storage: storage, ns: ns}
}

func (f *fixture) create(t *testing.T, name, url string, mutate func(*sourcev1.GitRepository)) *sourcev1.GitRepository {
	t.Helper()
	obj := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: sourcev1.GitRepositorySpec{
			URL:       url,
			Interval:  metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
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

// waitFor polls the GitRepository until check accepts it.
func (f *fixture) waitFor(t *testing.T, name string, check func(obj *sourcev1.GitRepository, ready *metav1.Condition) error) *sourcev1.GitRepository {
	t.Helper()
	obj := &sourcev1.GitRepository{}
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, obj); err != nil {
			return err
		}
		return check(obj, apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition))
	})
	return obj
}

// waitRevision waits for Ready=True at the given revision.
func (f *fixture) waitRevision(t *testing.T, name, revision string) *sourcev1.GitRepository {
	t.Helper()
	return f.waitFor(t, name, func(obj *sourcev1.GitRepository, ready *metav1.Condition) error {
		if obj.Status.Artifact == nil || obj.Status.Artifact.Revision != revision || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("want ready at %s, have artifact %+v, conditions %+v", revision, obj.Status.Artifact, obj.Status.Conditions)
		}
		return nil
	})
}

// artifactFiles reads the files of obj's artifact, by path.
func (f *fixture) artifactFiles(t *testing.T, obj *sourcev1.GitRepository) map[string]string {
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

// waitFailure waits for Ready=False with the given reason.
func (f *fixture) waitFailure(t *testing.T, name, reason string) *sourcev1.GitRepository {
	t.Helper()
	return f.waitFor(t, name, func(obj *sourcev1.GitRepository, ready *metav1.Condition) error {
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != reason {
			return fmt.Errorf("want Ready=False/%s, have %+v", reason, obj.Status.Conditions)
		}
		return nil
	})
}

func TestBranchRevisionAndIncrementalUpdate(t *testing.T) {
	f := setup(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "cluster")
	first := repo.CommitAndPush("first", map[string]string{"apps/cm.yaml": "kind: ConfigMap\n"})

	obj := f.create(t, "cluster", repo.URL, nil)
	obj = f.waitRevision(t, obj.Name, "main@sha1:"+first)
	a := obj.Status.Artifact
	if a.Digest == "" || a.Size == nil || *a.Size == 0 || a.LastUpdateTime.IsZero() {
		t.Fatalf("artifact is missing digest, size or time: %+v", a)
	}
	if _, err := os.Stat(filepath.Join(f.storage.Root, a.Path)); err != nil {
		t.Fatalf("artifact file: %v", err)
	}

	second := repo.CommitAndPush("second", map[string]string{"apps/cm2.yaml": "kind: ConfigMap\n"})
	at := testenv.RequestReconcile(t, f.env.Client, obj)
	obj = f.waitRevision(t, obj.Name, "main@sha1:"+second)
	if obj.Status.LastHandledReconcileAt != at {
		t.Errorf("lastHandledReconcileAt = %q, want %q", obj.Status.LastHandledReconcileAt, at)
	}
	dir, err := f.storage.Dir(obj.Status.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"apps/cm.yaml", "apps/cm2.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("artifact lacks %s: %v", p, err)
		}
	}

	// A third revision garbage-collects the first artifact, after it is in
	// status; the second one, which consumers may still be reading, stays.
	third := repo.CommitAndPush("third", map[string]string{"apps/cm3.yaml": "kind: ConfigMap\n"})
	previous := f.waitRevision(t, obj.Name, "main@sha1:"+second).Status.Artifact
	testenv.RequestReconcile(t, f.env.Client, obj)
	f.waitRevision(t, obj.Name, "main@sha1:"+third)
	testenv.Eventually(t, 10*time.Second, func() error {
		if _, err := os.Stat(filepath.Join(f.storage.Root, a.Path)); !os.IsNotExist(err) {
			return fmt.Errorf("first artifact %s was not garbage-collected: %v", a.Path, err)
		}
		return nil
	})
	if _, err := f.storage.Dir(previous); err != nil {
		t.Errorf("the previous artifact was removed: %v", err)
	}
}

func TestRefPrecedenceAndRevisionFormats(t *testing.T) {
	f := setup(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "refs")
	c1 := repo.CommitAndPush("one", map[string]string{"a.yaml": "a: 1\n"})
	repo.Git("tag", "v1.2.0")
	repo.Git("tag", "-a", "v1.3.0", "-m", "annotated")
	repo.Git("tag", "not-semver")
	repo.Push("--tags")
	c2 := repo.CommitAndPush("two", map[string]string{"a.yaml": "a: 2\n"})
	repo.Git("tag", "v2.0.0-rc.1")
	repo.Push("--tags")

	cases := []struct {
		name string
		ref  sourcev1.GitRepositoryRef
		want string
	}{
		{"branch", sourcev1.GitRepositoryRef{Branch: "main"}, "main@sha1:" + c2},
		{"tag", sourcev1.GitRepositoryRef{Tag: "v1.2.0"}, "v1.2.0@sha1:" + c1},
		{"annotated-tag", sourcev1.GitRepositoryRef{Tag: "v1.3.0"}, "v1.3.0@sha1:" + c1},
		{"semver", sourcev1.GitRepositoryRef{SemVer: ">=1.0.0 <2.0.0"}, "v1.3.0@sha1:" + c1},
		{"semver-over-tag", sourcev1.GitRepositoryRef{SemVer: "1.2.x", Tag: "v1.3.0"}, "v1.2.0@sha1:" + c1},
		{"commit", sourcev1.GitRepositoryRef{Commit: c1}, "sha1:" + c1},
		{"commit-on-branch", sourcev1.GitRepositoryRef{Commit: c1, Branch: "main"}, "main@sha1:" + c1},
		{"name", sourcev1.GitRepositoryRef{Name: "refs/heads/main"}, "refs/heads/main@sha1:" + c2},
		{"name-over-branch", sourcev1.GitRepositoryRef{Name: "refs/tags/v1.2.0", Branch: "main"}, "refs/tags/v1.2.0@sha1:" + c1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref := tc.ref
			f.create(t, tc.name, repo.URL, func(o *sourcev1.GitRepository) { o.Spec.Reference = &ref })
			f.waitRevision(t, tc.name, tc.want)
		})
	}
}

// allowHTTPAuth lets the test git servers, which serve plain http, take
// credentials.
func allowHTTPAuth(r *git.Reconciler) { r.AllowInsecureHTTPAuth = true }

func TestCredentials(t *testing.T) {
	f := setup(t, allowHTTPAuth)
	basic := testenv.NewGitServer(t)
	basic.Username, basic.Password = "flux", "s3cret"
	basicRepo := basic.NewRepo(t, "private")
	c := basicRepo.CommitAndPush("one", map[string]string{"a.yaml": "a: 1\n"})
	bearer := testenv.NewGitServer(t)
	bearer.Token = "tok3n"
	bearerRepo := bearer.NewRepo(t, "private")
	cb := bearerRepo.CommitAndPush("one", map[string]string{"a.yaml": "a: 1\n"})

	secret := func(name string, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, StringData: data}
		if err := f.env.Client.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	secret("basic", map[string]string{"username": "flux", "password": "s3cret"})
	secret("wrong", map[string]string{"username": "flux", "password": "nope"})
	secret("bearer", map[string]string{"bearerToken": "tok3n"})
	withSecret := func(name string) func(*sourcev1.GitRepository) {
		return func(o *sourcev1.GitRepository) { o.Spec.SecretRef = &meta.LocalObjectReference{Name: name} }
	}

	f.create(t, "basic", basicRepo.URL, withSecret("basic"))
	f.waitRevision(t, "basic", "main@sha1:"+c)
	f.create(t, "bearer", bearerRepo.URL, withSecret("bearer"))
	f.waitRevision(t, "bearer", "main@sha1:"+cb)
	f.create(t, "wrong", basicRepo.URL, withSecret("wrong"))
	f.waitFailure(t, "wrong", sourcev1.AuthenticationFailedReason)
	f.create(t, "none", basicRepo.URL, nil)
	f.waitFailure(t, "none", sourcev1.AuthenticationFailedReason)
	missing := f.create(t, "missing-secret", basicRepo.URL, withSecret("absent"))
	obj := f.waitFailure(t, missing.Name, sourcev1.AuthenticationFailedReason)
	if msg := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition).Message; !contains(msg, "absent") {
		t.Errorf("message does not name the missing secret: %q", msg)
	}
}

func TestIgnoreRules(t *testing.T) {
	f := setup(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "ignore")
	c := repo.CommitAndPush("files", map[string]string{
		"apps/app.yaml":           "kind: ConfigMap\n",
		"apps/secret.enc":         "x",
		"apps/.sourceignore":      "*.enc\n",
		"docs/readme.md":          "docs",
		"docs/deep/more.md":       "docs",
		".github/workflows/a.yml": "on: push\n",
		"keep/me.yaml":            "a: 1\n",
		"keep/deep/too.yaml":      "a: 1\n",
		"keep/deep/x.enc":         "x",
	})
	ignore := "docs/\n"
	f.create(t, "ignore", repo.URL, func(o *sourcev1.GitRepository) { o.Spec.Ignore = &ignore })
	obj := f.waitRevision(t, "ignore", "main@sha1:"+c)
	dir, err := f.storage.Dir(obj.Status.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"apps/app.yaml": true, "keep/me.yaml": true, "keep/deep/too.yaml": true,
		"keep/deep/x.enc": true, // apps/.sourceignore does not reach here
		"apps/secret.enc": false, "docs/readme.md": false, "docs/deep/more.md": false, ".github/workflows/a.yml": false,
	} {
		_, err := os.Stat(filepath.Join(dir, path))
		if have := err == nil; have != want {
			t.Errorf("%s in artifact = %v, want %v", path, have, want)
		}
	}

	// The next revision's files are listed from what it changed: the
	// same rules hold for a file it adds, and one it removes is gone.
	repo.Remove("keep/me.yaml")
	repo.Write(map[string]string{"apps/new.enc": "x", "apps/new.yaml": "kind: ConfigMap\n", "docs/new.md": "docs", "apps/app.yaml": "kind: Secret\n"})
	next := repo.Commit("next")
	repo.Push()
	testenv.RequestReconcile(t, f.env.Client, obj)
	obj = f.waitRevision(t, "ignore", "main@sha1:"+next)
	want := map[string]string{
		"apps/.sourceignore": "*.enc\n", "apps/app.yaml": "kind: Secret\n", "apps/new.yaml": "kind: ConfigMap\n",
		"keep/deep/too.yaml": "a: 1\n", "keep/deep/x.enc": "x",
	}
	if got := f.artifactFiles(t, obj); !maps.Equal(got, want) {
		t.Errorf("artifact of the next revision:\n%v\nwant\n%v", got, want)
	}

	// Other rules list the revision anew.
	obj.Spec.Ignore = nil
	if err := f.env.Client.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := f.env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if obj.Status.ObservedIgnore != nil {
			return fmt.Errorf("spec.ignore removed, still observed %q", *obj.Status.ObservedIgnore)
		}
		return nil
	})
	want["docs/readme.md"], want["docs/deep/more.md"], want["docs/new.md"] = "docs", "docs", "docs"
	if got := f.artifactFiles(t, obj); !maps.Equal(got, want) {
		t.Errorf("artifact without spec.ignore:\n%v\nwant\n%v", got, want)
	}
}

func TestDeletedBranchKeepsLastArtifact(t *testing.T) {
	f := setup(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "gone")
	repo.CommitAndPush("one", map[string]string{"a.yaml": "a: 1\n"})
	repo.Git("checkout", "-q", "-b", "feature")
	c := repo.Commit("feature")
	repo.Push("feature")
	obj := f.create(t, "gone", repo.URL, func(o *sourcev1.GitRepository) {
		o.Spec.Reference = &sourcev1.GitRepositoryRef{Branch: "feature"}
	})
	f.waitRevision(t, obj.Name, "feature@sha1:"+c)
	repo.Push(":feature")
	testenv.RequestReconcile(t, f.env.Client, obj)
	obj = f.waitFailure(t, obj.Name, sourcev1.GitOperationFailedReason)
	if obj.Status.Artifact == nil || obj.Status.Artifact.Revision != "feature@sha1:"+c {
		t.Fatalf("last artifact was lost: %+v", obj.Status.Artifact)
	}
	if msg := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition).Message; !contains(msg, "branch 'feature'") {
		t.Errorf("message does not name the branch: %q", msg)
	}
}

func TestSuspendStopsFetching(t *testing.T) {
	f := setup(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "suspend")
	c1 := repo.CommitAndPush("one", map[string]string{"a.yaml": "a: 1\n"})
	obj := f.create(t, "suspend", repo.URL, nil)
	obj = f.waitRevision(t, obj.Name, "main@sha1:"+c1)

	patch := client.MergeFrom(obj.DeepCopy())
	obj.Spec.Suspend = true
	if err := f.env.Client.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
	repo.CommitAndPush("two", map[string]string{"a.yaml": "a: 2\n"})
	at := testenv.RequestReconcile(t, f.env.Client, obj)
	// The request is observed only by a reconcile that ran; a suspended one
	// returns before recording it, so both must stay unchanged.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if err := f.env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if obj.Status.Artifact.Revision != "main@sha1:"+c1 || obj.Status.LastHandledReconcileAt == at {
			t.Fatalf("suspended GitRepository was reconciled: %+v", obj.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Credentials never go to a plain http:// URL unless the controller is
// told they may, and a URL's credentials never show in status or events.
func TestHTTPCredentialsAreRefusedAndURLsRedacted(t *testing.T) {
	f := setup(t)
	server := testenv.NewGitServer(t)
	server.Username, server.Password = "flux", "s3cret"
	repo := server.NewRepo(t, "private")
	repo.CommitAndPush("one", map[string]string{"a.yaml": "a: 1\n"})
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: f.ns}, StringData: map[string]string{"username": "flux", "password": "s3cret"}}
	if err := f.env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	f.create(t, "plain", repo.URL, func(o *sourcev1.GitRepository) { o.Spec.SecretRef = &meta.LocalObjectReference{Name: "basic"} })
	obj := f.waitFailure(t, "plain", sourcev1.AuthenticationFailedReason)
	if msg := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition).Message; !contains(msg, "use https://") {
		t.Fatalf("message %q does not say to use https", msg)
	}

	withCreds := strings.Replace(repo.URL, "http://", "http://flux:Sup3rSecretPassw0rd@", 1)
	f.create(t, "in-url", withCreds, nil)
	obj = f.waitFailure(t, "in-url", sourcev1.AuthenticationFailedReason)
	for _, c := range obj.Status.Conditions {
		if contains(c.Message, "Sup3rSecretPassw0rd") {
			t.Fatalf("condition %s shows the URL's password: %q", c.Type, c.Message)
		}
	}
	events := &eventsv1.EventList{}
	if err := f.env.Client.List(context.Background(), events, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if contains(e.Note, "Sup3rSecretPassw0rd") {
			t.Fatalf("event %s shows the URL's password: %q", e.Name, e.Note)
		}
	}
}
