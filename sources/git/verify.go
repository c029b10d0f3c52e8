package git

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/sources/outcome"
)

// failVerification records a signature that was not verified: Ready and
// SourceVerified false, the last artifact kept.
func (r *Reconciler) failVerification(obj *sourcev1.GitRepository, err error) {
	status.Set(obj, sourcev1.SourceVerifiedCondition, metav1.ConditionFalse, sourcev1.VerificationError, err.Error())
	r.fail(obj, sourcev1.VerificationError, err)
}

// verifySignatures checks, as Flux's spec.verify does, the OpenPGP
// signatures of the commit the ref resolved to (mode HEAD), of the tag it
// names (Tag), or both (TagAndHEAD), against the public keys of the Secret
// spec.verify.secretRef names, every value of which is an armored key.
// Nothing of a revision that fails is stored.
func (r *Reconciler) verifySignatures(ctx context.Context, obj *sourcev1.GitRepository, m *mirror, commit *object.Commit, rev string) error {
	v := obj.Spec.Verification
	if v == nil {
		obj.Status.SourceVerificationMode = nil
		status.Remove(obj, sourcev1.SourceVerifiedCondition)
		return nil
	}
	keyring, err := r.keyring(ctx, obj.Namespace, v.SecretRef.Name)
	if err != nil {
		return err
	}
	var verified []string
	if v.VerifyTag() {
		if !namesTag(obj.Spec.Reference) {
			return errors.New("spec.verify.mode Tag and TagAndHEAD verify a tag: give spec.ref.tag or spec.ref.semver")
		}
		tag, err := m.signedTag(rev, v.GetMode())
		if err != nil {
			return err
		}
		signer, err := tag.Verify(keyring)
		if err != nil {
			return fmt.Errorf("signature of tag '%s' not verified with the keys of Secret '%s': %w", tag.Name, v.SecretRef.Name, err)
		}
		verified = append(verified, fmt.Sprintf("tag '%s' signed by key %s", tag.Name, signer.PrimaryKey.KeyIdString()))
	}
	if v.VerifyHEAD() {
		if commit.PGPSignature == "" {
			return fmt.Errorf("commit %s is not signed, and spec.verify asks for a signature verified with the keys of Secret '%s'", commit.Hash, v.SecretRef.Name)
		}
		signer, err := commit.Verify(keyring)
		if err != nil {
			return fmt.Errorf("signature of commit %s not verified with the keys of Secret '%s': %w", commit.Hash, v.SecretRef.Name, err)
		}
		verified = append(verified, fmt.Sprintf("commit %s signed by key %s", commit.Hash, signer.PrimaryKey.KeyIdString()))
	}
	mode := v.GetMode()
	obj.Status.SourceVerificationMode = &mode
	status.Set(obj, sourcev1.SourceVerifiedCondition, metav1.ConditionTrue, "Succeeded", "verified "+strings.Join(verified, " and "))
	return nil
}

// namesTag says the ref resolves through a tag, by Flux's precedence:
// commit, name, semver, tag, branch.
func namesTag(ref *sourcev1.GitRepositoryRef) bool {
	switch {
	case ref == nil || ref.Commit != "":
		return false
	case ref.Name != "":
		return strings.HasPrefix(ref.Name, "refs/tags/")
	}
	return ref.SemVer != "" || ref.Tag != ""
}

// keyring joins the armored public keys the Secret holds.
func (r *Reconciler) keyring(ctx context.Context, namespace, name string) (string, error) {
	secret, err := outcome.Secret(ctx, r, namespace, name, "spec.verify.secretRef", "the armored OpenPGP public keys to trust")
	if err != nil {
		return "", err
	}
	var keys strings.Builder
	for _, data := range secret.Data {
		keys.Write(data)
		keys.WriteString("\n")
	}
	if keys.Len() == 0 {
		return "", fmt.Errorf("secret '%s/%s' named in spec.verify.secretRef holds no keys", namespace, name)
	}
	return keys.String(), nil
}

// signedTag is the annotated tag a tag revision ("v1.2.0@sha1:...") names.
func (m *mirror) signedTag(rev string, mode sourcev1.GitVerificationMode) (*object.Tag, error) {
	name, _, _ := strings.Cut(rev, "@")
	name = strings.TrimPrefix(name, "refs/tags/")
	ref, err := m.repo.Reference(plumbing.NewTagReferenceName(name), true)
	if err != nil {
		return nil, fmt.Errorf("tag '%s' not found in the fetched repository: %w", name, err)
	}
	tag, err := m.repo.TagObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("tag '%s' is a lightweight tag, which carries no signature: spec.verify.mode %s needs an annotated, signed tag: sign it with git tag -s", name, mode)
	}
	return tag, nil
}
