package git_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// signer is an OpenPGP key that signs commits and tags in a test repository.
type signer struct {
	entity *openpgp.Entity
	public string
}

func newSigner(t *testing.T, name string) signer {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@strata.dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return signer{entity: e, public: buf.String()}
}

// commit writes files and commits them in repo's work tree, signed by key
// (unsigned for nil), and returns the hash.
func signedCommit(t *testing.T, repo *testenv.Repo, files map[string]string, key *openpgp.Entity) string {
	t.Helper()
	repo.Write(files)
	r, err := gogit.PlainOpen(repo.Work)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	who := &object.Signature{Name: "test", Email: "test@strata.dev", When: time.Now()}
	hash, err := wt.Commit("change", &gogit.CommitOptions{Author: who, SignKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return hash.String()
}

func (f *fixture) keys(t *testing.T, name string, signers ...signer) {
	t.Helper()
	data := map[string][]byte{}
	for i, s := range signers {
		data[fmt.Sprintf("key%d.asc", i)] = []byte(s.public)
	}
	if err := f.env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Data: data}); err != nil {
		t.Fatal(err)
	}
}

func verifyMode(mode sourcev1.GitVerificationMode) func(*sourcev1.GitRepository) {
	return func(o *sourcev1.GitRepository) {
		o.Spec.Verification = &sourcev1.GitRepositoryVerification{Mode: mode, SecretRef: meta.LocalObjectReference{Name: "trusted"}}
	}
}

// TestVerifyHEAD: a commit signed by a trusted key is stored; an unsigned
// one, or one signed by a key the Secret does not hold, is not, and the
// last verified artifact stays.
func TestVerifyHEAD(t *testing.T) {
	f := setup(t)
	trusted, stranger := newSigner(t, "trusted"), newSigner(t, "stranger")
	f.keys(t, "trusted", newSigner(t, "other"), trusted)
	repo := testenv.NewGitServer(t).NewRepo(t, "signed")
	good := signedCommit(t, repo, map[string]string{"a.yaml": "a: 1\n"}, trusted.entity)
	repo.Push()
	obj := f.create(t, "signed", repo.URL, verifyMode(sourcev1.ModeGitHEAD))
	got := f.waitRevision(t, obj.Name, "main@sha1:"+good)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, sourcev1.SourceVerifiedCondition); c == nil || c.Status != metav1.ConditionTrue ||
		got.Status.SourceVerificationMode == nil || *got.Status.SourceVerificationMode != sourcev1.ModeGitHEAD {
		t.Fatalf("verified: condition %+v, mode %v", c, got.Status.SourceVerificationMode)
	}
	for name, key := range map[string]*openpgp.Entity{"not signed": nil, "signed by another key": stranger.entity} {
		bad := signedCommit(t, repo, map[string]string{"a.yaml": "a: " + name + "\n"}, key)
		repo.Push()
		testenv.RequestReconcile(t, f.env.Client, obj)
		failed := f.waitFor(t, obj.Name, func(o *sourcev1.GitRepository, ready *metav1.Condition) error {
			if ready == nil || ready.Reason != sourcev1.VerificationError || !strings.Contains(ready.Message, bad) {
				return fmt.Errorf("want VerificationError naming %s, have %+v", bad, o.Status.Conditions)
			}
			return nil
		})
		if failed.Status.Artifact.Revision != "main@sha1:"+good {
			t.Errorf("%s: artifact moved to %s", name, failed.Status.Artifact.Revision)
		}
	}
}

// TestVerifyTag: TagAndHEAD verifies the annotated tag and its commit;
// Tag on a branch says it needs a tag.
func TestVerifyTag(t *testing.T) {
	f := setup(t)
	trusted := newSigner(t, "trusted")
	f.keys(t, "trusted", trusted)
	repo := testenv.NewGitServer(t).NewRepo(t, "tagged")
	hash := signedCommit(t, repo, map[string]string{"a.yaml": "a: 1\n"}, trusted.entity)
	r, err := gogit.PlainOpen(repo.Work)
	if err != nil {
		t.Fatal(err)
	}
	who := &object.Signature{Name: "test", Email: "test@strata.dev", When: time.Now()}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateTag("v1.0.0", head.Hash(), &gogit.CreateTagOptions{Tagger: who, Message: "v1.0.0", SignKey: trusted.entity}); err != nil {
		t.Fatal(err)
	}
	repo.Push("main", "v1.0.0")
	tagged := f.create(t, "tagged", repo.URL, func(o *sourcev1.GitRepository) {
		verifyMode(sourcev1.ModeGitTagAndHEAD)(o)
		o.Spec.Reference = &sourcev1.GitRepositoryRef{Tag: "v1.0.0"}
	})
	got := f.waitRevision(t, tagged.Name, "v1.0.0@sha1:"+hash)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, sourcev1.SourceVerifiedCondition); c == nil || !strings.Contains(c.Message, "tag 'v1.0.0'") {
		t.Errorf("SourceVerified %+v does not name the tag", c)
	}
	branch := f.create(t, "branch", repo.URL, verifyMode(sourcev1.ModeGitTag))
	failed := f.waitFailure(t, branch.Name, sourcev1.VerificationError)
	if msg := apimeta.FindStatusCondition(failed.Status.Conditions, meta.ReadyCondition).Message; !strings.Contains(msg, "spec.ref.tag") {
		t.Errorf("message %q does not say a tag is needed", msg)
	}
}
