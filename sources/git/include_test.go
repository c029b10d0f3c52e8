package git_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// TestInclude: spec.include puts another GitRepository's artifact (its
// fromPath) at toPath in this one's, over the repository's files of the
// same paths, and this one's spec.ignore applies to them too; a fromPath
// the included artifact lacks is named; until that GitRepository has an artifact, this one waits
// with IncludeUnavailable; a new artifact of it makes a new artifact here,
// at the same revision.
func TestInclude(t *testing.T) {
	f := setup(t)
	server := testenv.NewGitServer(t)
	shared := server.NewRepo(t, "shared")
	shared.CommitAndPush("one", map[string]string{"deploy/app.yaml": "v: 1\n", "deploy/notes.txt": "n\n", "readme.md": "shared\n"})
	cluster := server.NewRepo(t, "cluster")
	commit := cluster.CommitAndPush("one", map[string]string{
		"clusters/x.yaml": "x: 1\n", "vendor/keep.yaml": "own: 1\n", "vendor/app.yaml": "replaced: true\n",
	})

	including := f.create(t, "cluster", cluster.URL, func(o *sourcev1.GitRepository) {
		o.Spec.Include = []sourcev1.GitRepositoryInclude{{GitRepositoryRef: meta.LocalObjectReference{Name: "shared"}, FromPath: "deploy", ToPath: "vendor"}}
		ignore := "*.txt\n"
		o.Spec.Ignore = &ignore
	})
	waiting := f.waitFailure(t, including.Name, sourcev1.IncludeUnavailableCondition)
	if msg := apimeta.FindStatusCondition(waiting.Status.Conditions, meta.ReadyCondition).Message; !strings.Contains(msg, "'shared'") {
		t.Errorf("the wait for the include does not name it: %q", msg)
	}

	f.create(t, "shared", shared.URL, nil)
	first := f.waitRevision(t, including.Name, "main@sha1:"+commit)
	want := map[string]string{"clusters/x.yaml": "x: 1\n", "vendor/keep.yaml": "own: 1\n", "vendor/app.yaml": "v: 1\n"}
	if got := f.artifactFiles(t, first); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("artifact with the include: %v, want %v", got, want)
	}
	if apimeta.FindStatusCondition(first.Status.Conditions, sourcev1.IncludeUnavailableCondition) != nil {
		t.Errorf("IncludeUnavailable stays after the include became available: %+v", first.Status.Conditions)
	}

	// A fromPath the included artifact lacks says so, and what to do.
	f.create(t, "wrongpath", cluster.URL, func(o *sourcev1.GitRepository) {
		o.Spec.Include = []sourcev1.GitRepositoryInclude{{GitRepositoryRef: meta.LocalObjectReference{Name: "shared"}, FromPath: "nope"}}
	})
	wrong := f.waitFailure(t, "wrongpath", sourcev1.IncludeUnavailableCondition)
	if msg := apimeta.FindStatusCondition(wrong.Status.Conditions, meta.ReadyCondition).Message; !strings.Contains(msg, "fromPath 'nope'") || !strings.Contains(msg, "fix fromPath") {
		t.Errorf("a missing fromPath reads %q", msg)
	}

	shared.CommitAndPush("two", map[string]string{"deploy/app.yaml": "v: 2\n"})
	testenv.RequestReconcile(t, f.env.Client, f.waitRevision(t, "shared", first.Status.IncludedArtifacts[0].Revision))
	second := f.waitFor(t, including.Name, func(o *sourcev1.GitRepository, ready *metav1.Condition) error {
		if o.Status.Artifact == nil || o.Status.Artifact.Digest == first.Status.Artifact.Digest || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("no new artifact after the included repository moved: %+v", o.Status.Artifact)
		}
		return nil
	})
	if second.Status.Artifact.Revision != first.Status.Artifact.Revision {
		t.Errorf("the revision moved from %s to %s, though this repository did not", first.Status.Artifact.Revision, second.Status.Artifact.Revision)
	}
	if got := f.artifactFiles(t, second)["vendor/app.yaml"]; got != "v: 2\n" {
		t.Errorf("vendor/app.yaml after the include moved: %q", got)
	}
	shared2 := f.waitFor(t, "shared", func(o *sourcev1.GitRepository, _ *metav1.Condition) error { return nil })
	if len(second.Status.IncludedArtifacts) != 1 || second.Status.IncludedArtifacts[0].Digest != shared2.Status.Artifact.Digest {
		t.Errorf("status.includedArtifacts %+v, want the included repository's artifact %+v", second.Status.IncludedArtifacts, shared2.Status.Artifact)
	}
}
