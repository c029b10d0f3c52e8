package decrypt_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-gitops/strata/internal/testing/sopstest"
	"github.com/strata-gitops/strata/reconciler/decrypt"
)

const plaintext = "correct-horse-battery-staple"

// Files encrypted by the real sops CLI decrypt with the Secret's age
// identity, in each format a Kustomization reads; with another key the
// error is DecryptionFailed, names the file and its recipient, and holds
// no value.
func TestFilesSopsEncryptedDecrypt(t *testing.T) {
	key, other := sopstest.NewKey(t), sopstest.NewKey(t)
	right, err := decrypt.FromSecret("flux-system/sops-age", map[string][]byte{"age.agekey": []byte(key.Identity + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := decrypt.FromSecret("flux-system/sops-age", map[string][]byte{"other.agekey": []byte(other.Identity)})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + plaintext + "\n",
		"secret.json": `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": "` + plaintext + `"}}`,
		"db.env":      "PASSWORD=" + plaintext + "\n",
		"db.ini":      "[db]\npassword = " + plaintext + "\n",
	}
	for name, content := range files {
		t.Run(name, func(t *testing.T) {
			enc := sopstest.Encrypt(t, name, content, key.Recipient)
			if strings.Contains(enc, plaintext) || !decrypt.Encrypted(name, []byte(enc)) {
				t.Fatalf("sops did not encrypt %s:\n%s", name, enc)
			}
			out, was, err := right.File(name, []byte(enc))
			if err != nil || !was || !strings.Contains(string(out), plaintext) {
				t.Fatalf("decrypting %s: %v, encrypted %v:\n%s", name, err, was, out)
			}
			_, _, err = wrong.File(name, []byte(enc))
			if !errors.Is(err, decrypt.ErrDecryptionFailed) || !strings.Contains(err.Error(), key.Recipient) ||
				!strings.Contains(err.Error(), name) || strings.Contains(err.Error(), plaintext) {
				t.Fatalf("decrypting %s with another key: %v; want DecryptionFailed naming the file and %s, without the value", name, err, key.Recipient)
			}
		})
	}
	plain := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sops-notes}\ndata: {note: sops is a tool}\n")
	if out, was, err := right.File("notes.yaml", plain); err != nil || was || string(out) != string(plain) {
		t.Errorf("a plain file that mentions sops: %v, %v", err, was)
	}
}

// A file the real sops CLI encrypted for a PGP key decrypts with that
// private key as a Secret's *.asc entry, and not with another; the error
// names the key's fingerprint.
func TestFilesEncryptedForAPGPKeyDecrypt(t *testing.T) {
	key, other := sopstest.NewPGPKey(t), sopstest.NewPGPKey(t)
	content := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + plaintext + "\n"
	enc := sopstest.EncryptPGP(t, "secret.yaml", content, key)
	if strings.Contains(enc, plaintext) || !decrypt.Encrypted("secret.yaml", []byte(enc)) {
		t.Fatalf("sops did not encrypt:\n%s", enc)
	}
	right, err := decrypt.FromSecret("flux-system/sops-gpg", map[string][]byte{"sops.asc": []byte(key.Private)})
	if err != nil {
		t.Fatal(err)
	}
	if out, was, err := right.File("secret.yaml", []byte(enc)); err != nil || !was || !strings.Contains(string(out), plaintext) {
		t.Fatalf("decrypting with the PGP key: %v, encrypted %v:\n%s", err, was, out)
	}
	keyFile := filepath.Join(t.TempDir(), "sops.asc")
	if err := os.WriteFile(keyFile, []byte(key.Private), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := decrypt.FromFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := fromFile.File("secret.yaml", []byte(enc)); err != nil || !strings.Contains(string(out), plaintext) {
		t.Fatalf("decrypting with the PGP key file (strata plan --decryption-key-file): %v", err)
	}
	wrong, err := decrypt.FromSecret("flux-system/sops-gpg", map[string][]byte{"other.asc": []byte(other.Private)})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = wrong.File("secret.yaml", []byte(enc))
	if !errors.Is(err, decrypt.ErrDecryptionFailed) || !strings.Contains(err.Error(), key.Fingerprint) || strings.Contains(err.Error(), plaintext) {
		t.Fatalf("decrypting with another PGP key: %v; want DecryptionFailed naming %s", err, key.Fingerprint)
	}
}

// A Secret without a key, with a key that is not one, or with a PGP
// public key in place of a private one, is refused, naming it.
func TestKeysOfTheDecryptionSecret(t *testing.T) {
	public := sopstest.NewPGPKey(t).Public(t)
	for data, says := range map[string]string{
		"":           "holds no age identity",
		"pgp.asc":    "not an armored PGP key",
		"pub.asc":    "is a public key",
		"bad.agekey": "not age identities",
	} {
		secret := map[string][]byte{}
		switch data {
		case "":
		case "pub.asc":
			secret[data] = []byte(public)
		default:
			secret[data] = []byte("not a key")
		}
		if _, err := decrypt.FromSecret("ns/keys", secret); err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "ns/keys") {
			t.Errorf("%q: %v; want an error saying %q", data, err, says)
		}
	}
}
