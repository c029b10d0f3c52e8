package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/engine/decrypt"
	"github.com/strata-gitops/strata/engine/plan"
	"github.com/strata-gitops/strata/engine/plan/render"
	"github.com/strata-gitops/strata/internal/testing/sopstest"
)

// A Kustomization that decrypts with SOPS renders in a plan without the
// key: its encrypted Secret is changed by its cipher text, shown with no
// value, neither plaintext nor cipher text nor encrypted data key.
func TestAnEncryptedSecretIsPlannedWithoutItsValues(t *testing.T) {
	key := sopstest.NewKey(t)
	secret := func(value string) string {
		return sopstest.Encrypt(t, "creds.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: databases\nstringData:\n  password: "+value+"\n", key.Recipient)
	}
	files := fixture()
	files["clusters/homelab/secrets.yaml"] = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: secrets, namespace: flux-system}
spec:
  interval: 10m
  path: ./secrets
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
  decryption: {provider: sops, secretRef: {name: sops-age}}
`
	files["secrets/creds.yaml"] = secret("old-plaintext-value")
	r := newRepo(t, files)
	r.branch("rotate", map[string]string{"secrets/creds.yaml": secret("new-plaintext-value")})
	p := run(t, r, "rotate", false)
	if len(p.Errors) > 0 {
		t.Fatalf("errors: %v", p.Errors)
	}
	ch, ok := findChange(p, "Secret/databases/creds")
	if !ok || ch.Action != plan.Changed {
		t.Fatalf("the re-encrypted Secret is %+v, want changed", ch)
	}
	var out bytes.Buffer
	_ = render.WriteMarkdown(&out, p, 0)
	_ = render.WriteText(&out, p, false)
	text := out.String()
	for _, secret := range []string{"plaintext-value", "ENC[AES256_GCM", "-----BEGIN AGE ENCRYPTED FILE-----"} {
		if strings.Contains(text, secret) {
			t.Errorf("the plan shows %q:\n%s", secret, text)
		}
	}
}

// With --decryption-key-file the plan decrypts and says which keys of an
// encrypted Secret change, never their values.
func TestAKeyFileShowsWhichSecretKeysChange(t *testing.T) {
	key := sopstest.NewKey(t)
	secret := func(password string) string {
		return sopstest.Encrypt(t, "creds.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: databases\nstringData:\n  user: admin-plaintext\n  password: "+password+"\n", key.Recipient)
	}
	files := fixture()
	files["clusters/homelab/secrets.yaml"] = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: secrets, namespace: flux-system}\n" +
		"spec:\n  interval: 10m\n  path: ./secrets\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n  decryption: {provider: sops, secretRef: {name: sops-age}}\n"
	files["secrets/creds.yaml"] = secret("old-plaintext-value")
	r := newRepo(t, files)
	r.branch("rotate", map[string]string{"secrets/creds.yaml": secret("new-plaintext-value")})
	keyFile := filepath.Join(t.TempDir(), "age.key")
	if err := os.WriteFile(keyFile, []byte("# created: test\n"+key.Identity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dec, err := decrypt.FromFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	p := planOf(t, r, "rotate", func(o *plan.Options) { o.Decrypter = dec })
	ch, ok := findChange(p, "Secret/databases/creds")
	if !ok {
		t.Fatalf("no change of the Secret: %s", dump(p))
	}
	if !strings.Contains(ch.Diff, "password: '*** (after)'") || !strings.Contains(ch.Diff, "user: '***'") {
		t.Errorf("the diff does not say that password changed and user did not:\n%s", ch.Diff)
	}
	var out bytes.Buffer
	_ = render.WriteMarkdown(&out, p, 0)
	_ = render.WriteText(&out, p, false)
	for _, v := range []string{"plaintext", "ENC[AES256_GCM"} {
		if strings.Contains(out.String(), v) {
			t.Errorf("the plan shows %q", v)
		}
	}
}
