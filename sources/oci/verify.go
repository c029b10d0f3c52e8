package oci

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-gitops/strata/internal/status"
	"github.com/strata-gitops/strata/sources/cosignsig"
	"github.com/strata-gitops/strata/sources/outcome"
)

// verify checks, with spec.verify, that the artifact is signed by one of
// the cosign public keys of spec.verify.secretRef (every value whose key
// ends in .pub). Nothing of an artifact that fails is stored.
func (r *Reconciler) verify(ctx context.Context, obj *sourcev1.OCIRepository, reg *registry, want wanted) error {
	v := obj.Spec.Verify
	if v == nil {
		status.Remove(obj, sourcev1.SourceVerifiedCondition)
		return nil
	}
	if v.Provider != "cosign" {
		return fmt.Errorf("spec.verify.provider '%s' is not served: strata verifies cosign signatures made with a key", v.Provider)
	}
	if v.SecretRef == nil {
		return errors.New("spec.verify without a secretRef asks for keyless verification (Fulcio and Rekor), which strata does not serve: " +
			"sign with a key (cosign sign --key) and name a Secret of its .pub in spec.verify.secretRef")
	}
	keys, err := r.publicKeys(ctx, obj.Namespace, v.SecretRef.Name)
	if err != nil {
		return err
	}
	sigRef := reg.repo.Tag(cosignsig.Tag(digestOf(want)))
	img, err := remote.Image(sigRef, append(reg.opts, remote.WithContext(ctx))...)
	if err != nil {
		return fmt.Errorf("no cosign signature of '%s' found at '%s': %w", want.digest, sigRef, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("reading the signature '%s': %w", sigRef, err)
	}
	read := func(d v1.Descriptor) ([]byte, error) {
		l, err := img.LayerByDigest(d.Digest)
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(io.LimitReader(rc, cosignsig.MaxPayload))
	}
	if err := cosignsig.Check(m, read, digestOf(want), keys); err != nil {
		return fmt.Errorf("the artifact '%s' is not signed by a key of secret '%s/%s': %w", want.digest, obj.Namespace, v.SecretRef.Name, err)
	}
	status.Set(obj, sourcev1.SourceVerifiedCondition, metav1.ConditionTrue, meta.SucceededReason,
		fmt.Sprintf("verified signature of revision %s", want.revision))
	return nil
}

func digestOf(w wanted) v1.Hash {
	h, _ := v1.NewHash(w.digest.DigestStr())
	return h
}

// publicKeys reads the .pub values of a Secret, in key order.
func (r *Reconciler) publicKeys(ctx context.Context, namespace, name string) ([]*ecdsa.PublicKey, error) {
	key := namespace + "/" + name
	secret, err := outcome.Secret(ctx, r, namespace, name, "spec.verify.secretRef", "the cosign.pub keys to trust")
	if err != nil {
		return nil, err
	}
	var names []string
	for k := range secret.Data {
		if strings.HasSuffix(k, ".pub") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("secret '%s' named in spec.verify.secretRef holds no key ending in .pub", key)
	}
	keys := make([]*ecdsa.PublicKey, 0, len(names))
	for _, n := range names {
		k, err := cosignsig.ParsePublicKey(secret.Data[n])
		if err != nil {
			return nil, fmt.Errorf("secret '%s' key %s: %w", key, n, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// failVerification records a failed verification: SourceVerified false
// as well as Ready false, the last artifact kept.
func (r *Reconciler) failVerification(obj *sourcev1.OCIRepository, err error) error {
	status.Set(obj, sourcev1.SourceVerifiedCondition, metav1.ConditionFalse, sourcev1.VerificationError, err.Error())
	return r.fail(obj, sourcev1.VerificationError, err)
}
