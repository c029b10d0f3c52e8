package git_test

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// TestRecurseSubmodules: with spec.recurseSubmodules, the files of the
// commit a submodule points at (its URL relative to the repository's, as
// git resolves it) are in the artifact at the submodule's path, under the
// repository's ignore rules; moving the submodule to another commit makes
// a new artifact with its files.
func TestRecurseSubmodules(t *testing.T) {
	f := setup(t)
	server := testenv.NewGitServer(t)
	lib := server.NewRepo(t, "lib")
	first := lib.CommitAndPush("one", map[string]string{"deploy/cm.yaml": "v: 1\n", "notes.txt": "n\n"})
	parent := server.NewRepo(t, "parent")
	point := func(libCommit string) string {
		parent.Git("update-index", "--add", "--cacheinfo", "160000,"+libCommit+",vendor/lib")
		parent.Git("commit", "-q", "-m", "lib at "+libCommit)
		parent.Push()
		return "main@sha1:" + parent.Git("rev-parse", "HEAD")
	}
	parent.Write(map[string]string{".gitmodules": "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = ../lib.git\n", "top.yaml": "t: 1\n"})
	parent.Git("add", ".gitmodules", "top.yaml")
	rev := point(first)

	obj := f.create(t, "parent", parent.URL, func(o *sourcev1.GitRepository) {
		o.Spec.RecurseSubmodules = true
		ignore := "*.txt\n"
		o.Spec.Ignore = &ignore
	})
	content := func(revision string) map[string]string {
		t.Helper()
		got := f.waitRevision(t, obj.Name, revision)
		if !got.Status.ObservedRecurseSubmodules {
			t.Errorf("status.observedRecurseSubmodules is not set")
		}
		return f.artifactFiles(t, got)
	}
	files := content(rev)
	if files["vendor/lib/deploy/cm.yaml"] != "v: 1\n" || files["top.yaml"] != "t: 1\n" {
		t.Errorf("artifact with the submodule: %v", files)
	}
	if _, ok := files["vendor/lib/notes.txt"]; ok {
		t.Errorf("the repository's spec.ignore did not apply to the submodule's files: %v", files)
	}

	second := lib.CommitAndPush("two", map[string]string{"deploy/cm.yaml": "v: 2\n"})
	before := rev
	rev = point(second)
	testenv.RequestReconcile(t, f.env.Client, obj)
	if got := content(rev)["vendor/lib/deploy/cm.yaml"]; got != "v: 2\n" {
		t.Errorf("after the submodule moved: %q", got)
	}
	// The move is a change under the submodule's path, so a Kustomization
	// there is not taken as untouched by the new revision.
	digest := f.waitRevision(t, obj.Name, rev).Status.Artifact.Digest
	if f.storage.Untouched(digest, before, "vendor/lib/deploy") || !f.storage.Untouched(digest, before, "elsewhere") {
		t.Errorf("the submodule's move is not recorded as a change under its path only")
	}
}

// TestSubmoduleWithoutEntry: a gitlink .gitmodules does not list fails the
// fetch naming it and what to do, the first such path every time.
func TestSubmoduleWithoutEntry(t *testing.T) {
	f := setup(t)
	parent := testenv.NewGitServer(t).NewRepo(t, "parent")
	parent.Write(map[string]string{".gitmodules": "[submodule \"other\"]\n\tpath = other\n\turl = ../other.git\n"})
	parent.Git("add", ".gitmodules")
	parent.Git("commit", "-q", "-m", "modules")
	for _, p := range []string{"d", "c", "b", "a"} {
		parent.Git("update-index", "--add", "--cacheinfo", "160000,"+parent.Git("rev-parse", "HEAD")+","+p)
	}
	parent.Git("commit", "-q", "-m", "gitlinks")
	parent.Push()
	f.create(t, "parent", parent.URL, func(o *sourcev1.GitRepository) { o.Spec.RecurseSubmodules = true })
	obj := f.waitFailure(t, "parent", sourcev1.GitOperationFailedReason)
	msg := apimeta.FindStatusCondition(obj.Status.Conditions, meta.ReadyCondition).Message
	if !strings.Contains(msg, "submodule 'a' has no entry in .gitmodules") || !strings.Contains(msg, "add one or remove the submodule") {
		t.Errorf("message %q does not name the first submodule without an entry and what to do", msg)
	}
}
