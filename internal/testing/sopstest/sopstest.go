// Package sopstest encrypts files with the real sops CLI (bin/sops,
// hack/tools.sh sops) for an age key made in the test, as users encrypt
// the files they keep in Git.
package sopstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"filippo.io/age"

	"github.com/strata-gitops/strata/internal/testing/testenv"
)

// Key is an age identity made for a test.
type Key struct {
	Identity  string // AGE-SECRET-KEY-1..., the Secret's *.agekey entry
	Recipient string // age1..., what files are encrypted for
}

// NewKey makes an age key.
func NewKey(t testing.TB) Key {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return Key{Identity: id.String(), Recipient: id.Recipient().String()}
}

// Encrypt encrypts a file's content with sops for the recipient, as
// `sops --encrypt --age RECIPIENT` does, the file's kind by its name
// (yaml, json, env, ini). YAML and JSON encrypt only data and stringData
// (--encrypted-regex), as Flux's docs tell users to, so the objects stay
// readable.
func Encrypt(t testing.TB, name, content, recipient string) string {
	t.Helper()
	return encrypt(t, name, content, []string{"--age", recipient}, nil)
}

// EncryptWhole encrypts every value of a file for an age recipient, as
// a Helm values file is encrypted: no --encrypted-regex.
func EncryptWhole(t testing.TB, name, content, recipient string) string {
	t.Helper()
	return encrypt(t, name, content, []string{"--age", recipient, "--encrypted-regex", "."}, nil)
}

// PGPKey is an OpenPGP key made for a test.
type PGPKey struct {
	Fingerprint string // upper-case hex, what files are encrypted for
	Private     string // armored private key, the Secret's *.asc entry
	entity      *openpgp.Entity
}

// NewPGPKey makes an OpenPGP key without a passphrase.
func NewPGPKey(t testing.TB) PGPKey {
	t.Helper()
	e, err := openpgp.NewEntity("strata test", "", "test@strata.dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	var priv bytes.Buffer
	w, err := armor.Encode(&priv, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return PGPKey{Fingerprint: fmt.Sprintf("%X", e.PrimaryKey.Fingerprint), Private: priv.String(), entity: e}
}

// Public is the key's armored public half.
func (k PGPKey) Public(t testing.TB) string {
	t.Helper()
	var pub bytes.Buffer
	w, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.entity.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return pub.String()
}

// EncryptPGP encrypts as Encrypt does, for a PGP key, as `sops --encrypt
// --pgp FINGERPRINT` does: sops finds the public key in the keyring of
// its GnuPG home, given it here.
func EncryptPGP(t testing.TB, name, content string, key PGPKey) string {
	t.Helper()
	home := t.TempDir()
	var ring bytes.Buffer
	if err := key.entity.Serialize(&ring); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "pubring.gpg"), ring.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return encrypt(t, name, content, []string{"--pgp", key.Fingerprint}, []string{"GNUPGHOME=" + home})
}

// EncryptWithConfig encrypts a file as sops does with a .sops.yaml of
// the given content: its creation rules choose the keys, key groups and
// Shamir threshold, which values are encrypted and what the MAC covers.
func EncryptWithConfig(t testing.TB, name, content, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".sops.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return run(t, name, content, []string{"--encrypt", "--config", path}, nil)
}

// Decrypt decrypts a file with the real sops CLI and an age identity, as
// `sops --decrypt` does: what strata's decryption must agree with.
func Decrypt(t testing.TB, name, encrypted, identity string) string {
	t.Helper()
	return run(t, name, encrypted, []string{"--decrypt"}, []string{"SOPS_AGE_KEY=" + identity})
}

// encrypt runs sops --encrypt with keyArgs and env on a file.
func encrypt(t testing.TB, name, content string, keyArgs, env []string) string {
	t.Helper()
	args := append([]string{"--encrypt"}, keyArgs...)
	if ext := filepath.Ext(name); (ext == ".yaml" || ext == ".yml" || ext == ".json") && !slices.Contains(keyArgs, "--encrypted-regex") {
		args = append(args, "--encrypted-regex", "^(data|stringData)$")
	}
	return run(t, name, content, args, env)
}

// run runs sops with args and env on a file of the content.
func run(t testing.TB, name, content string, args, env []string) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "sops")
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "bin/sops is not built: run hack/tools.sh sops")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.Base(name))
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(args, path)...)
	cmd.Env = append(append(os.Environ(), "SOPS_DISABLE_VERSION_CHECK=1"), env...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if e, ok := err.(*exec.ExitError); ok {
			stderr = string(e.Stderr)
		}
		t.Fatalf("sops %s %s: %v: %s", args[0], name, err, strings.TrimSpace(stderr))
	}
	return string(out)
}
