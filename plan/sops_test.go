package plan_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/sopstest"
	"github.com/strata-gitops/strata/plan"
	"github.com/strata-gitops/strata/plan/report"
	"github.com/strata-gitops/strata/reconciler/decrypt"
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
	_ = report.WriteMarkdown(&out, p, 0)
	_ = report.WriteText(&out, p, false)
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
	_ = report.WriteMarkdown(&out, p, 0)
	_ = report.WriteText(&out, p, false)
	for _, v := range []string{"plaintext", "ENC[AES256_GCM"} {
		if strings.Contains(out.String(), v) {
			t.Errorf("the plan shows %q", v)
		}
	}
}

// With --decryption-key-file every value SOPS revealed is masked, in any
// kind and every output: an encrypted ConfigMap, a values file a
// configMapGenerator reads, and a Secret's value substituted into another
// Kustomization's ConfigMap. The changes still show, compared by a tag.
func TestAKeyFileNeverPrintsADecryptedValue(t *testing.T) {
	key := sopstest.NewKey(t)
	enc := func(name, content string) string { return sopstest.Encrypt(t, name, content, key.Recipient) }
	configMap := func(v string) string {
		return enc("settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: databases\ndata:\n  token: "+v+"\n")
	}
	values := func(v string) string {
		return sopstest.EncryptWhole(t, "values.yaml", "auth:\n  password: "+v+"\n", key.Recipient)
	}
	vars := func(v string) string {
		return enc("vars.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: vars\n  namespace: flux-system\ndata:\n  api_key: "+
			base64.StdEncoding.EncodeToString([]byte(v))+"\n")
	}
	ks := func(name, path, extra string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: " + name + ", namespace: flux-system}\n" +
			"spec:\n  interval: 10m\n  path: " + path + "\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n" + extra
	}
	files := fixture()
	files["clusters/homelab/secrets.yaml"] = ks("secrets", "./secrets", "  decryption: {provider: sops, secretRef: {name: sops-age}}\n")
	files["clusters/homelab/consumer.yaml"] = ks("consumer", "./consumer", "  dependsOn: [{name: secrets}]\n  postBuild:\n    substituteFrom: [{kind: Secret, name: vars}]\n")
	files["secrets/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [settings.yaml, vars.yaml]\n" +
		"configMapGenerator:\n- name: app-values\n  namespace: databases\n  files: [values.yaml]\n  options: {disableNameSuffixHash: true}\n"
	files["secrets/settings.yaml"] = configMap("cm-plaintext-old")
	files["secrets/values.yaml"] = values("values-plaintext-old")
	files["secrets/vars.yaml"] = vars("subst-plaintext-old")
	files["consumer/client.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: client\n  namespace: databases\ndata:\n  url: https://api.example/?key=${api_key}\n"
	r := newRepo(t, files)
	r.branch("rotate", map[string]string{
		"secrets/settings.yaml": configMap("cm-plaintext-new"),
		"secrets/values.yaml":   values("values-plaintext-new"),
		"secrets/vars.yaml":     vars("subst-plaintext-new"),
	})
	keyFile := filepath.Join(t.TempDir(), "age.key")
	if err := os.WriteFile(keyFile, []byte(key.Identity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dec, err := decrypt.FromFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	p := planOf(t, r, "rotate", func(o *plan.Options) { o.Decrypter = dec })
	if len(p.Errors) > 0 {
		t.Fatalf("errors: %v", p.Errors)
	}
	for _, object := range []string{"ConfigMap/databases/settings", "ConfigMap/databases/app-values", "ConfigMap/databases/client"} {
		ch, ok := findChange(p, object)
		if !ok || ch.Action != plan.Changed || !strings.Contains(ch.Diff, "***sops:") {
			t.Errorf("%s: %+v; want it changed, its value shown masked", object, ch)
		}
	}
	var out bytes.Buffer
	_ = report.WriteMarkdown(&out, p, 0)
	_ = report.WriteText(&out, p, false)
	if err := json.NewEncoder(&out).Encode(p); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"plaintext-old", "plaintext-new", "ENC[AES256_GCM"} {
		if strings.Contains(out.String(), v) {
			t.Errorf("the plan shows %q:\n%s", v, out.String())
		}
	}
}
