package up

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	fluxNamespace = "flux-system"
	hookToken     = "strata-up-local-token"
)

// bootstrap applies what `flux bootstrap` would: the flux-system
// GitRepository and root Kustomization, plus a Receiver that the local git
// server calls on push. It returns the Receiver's webhook path.
func bootstrap(ctx context.Context, c client.Client, repoURL string) (string, error) {
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}},
		&sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace, Namespace: fluxNamespace},
			Spec: sourcev1.GitRepositorySpec{
				URL:       repoURL,
				Interval:  metav1.Duration{Duration: time.Minute},
				Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
			},
		},
		&kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace, Namespace: fluxNamespace},
			Spec: kustomizev1.KustomizationSpec{
				Interval:  metav1.Duration{Duration: 10 * time.Minute},
				Path:      "./cluster",
				Prune:     true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: fluxNamespace},
			},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "receiver-token", Namespace: fluxNamespace},
			StringData: map[string]string{"token": hookToken},
		},
		receiver(),
	}
	for _, o := range objects {
		if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return "", fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return receiver().GetWebhookPath(hookToken), nil
}

func receiver() *notificationv1.Receiver {
	return &notificationv1.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: "git-push", Namespace: fluxNamespace},
		Spec: notificationv1.ReceiverSpec{
			Type:      notificationv1.GenericReceiver,
			SecretRef: &meta.LocalObjectReference{Name: "receiver-token"},
			Resources: []notificationv1.ReceiverResource{{CrossNamespaceObjectReference: notificationv1.CrossNamespaceObjectReference{
				APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.GitRepositoryKind, Name: fluxNamespace,
			}}},
		},
	}
}

// demoKeyFile is the example repository's age key (public, for strata up
// only): the apps Kustomization decrypts apps/notes-credentials.yaml with
// it.
const demoKeyFile = "hack/homelab-sops.agekey"

// demoDecryptionKey makes the Secret flux-system/sops-age of the example
// repository's age key, as a user makes theirs before bootstrap
// (docs/engine.md, "SOPS decryption").
func demoDecryptionKey(ctx context.Context, c client.Client, o Options) error {
	key, err := os.ReadFile(filepath.Join(o.Root, demoKeyFile))
	if err != nil {
		return fmt.Errorf("the example repository's age key: %w", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-age", Namespace: fluxNamespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, secret, func() error {
		secret.Data = map[string][]byte{"homelab.agekey": key}
		return nil
	})
	return err
}
