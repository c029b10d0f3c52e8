// Package decrypt decrypts what SOPS encrypted in a Kustomization's
// files, as Flux's kustomize-controller does for spec.decryption
// (provider sops): YAML, JSON, dotenv and INI files in SOPS's format,
// read here (SOPS's own packages for them bring in the clients of every
// cloud key service, which strata does not serve), with SOPS's age and
// Shamir packages and the OpenPGP library SOPS uses for the data key.
// The keys are the age identities (*.agekey entries) and PGP private
// keys (*.asc) of the Secret the Kustomization names, held in memory
// only. Plaintext exists only in the build's memory: never on disk, in
// an error, a log or an event.
package decrypt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	sopsage "github.com/getsops/sops/v3/age"
)

// ErrDecryptionFailed marks a failure to decrypt: a wrong or missing key,
// or a file whose MAC does not hold.
var ErrDecryptionFailed = errors.New("DecryptionFailed")

// Decrypter decrypts with a set of age identities and PGP private keys.
type Decrypter struct {
	ids sopsage.ParsedIdentities
	pgp openpgp.EntityList
	// revealed, when set (Recording), keeps what decryption revealed.
	revealed *Plaintexts
}

// FromSecret reads the keys of a decryption Secret's data: every key
// ending in .agekey, each holding one or more age identities, and every
// key ending in .asc, an armored PGP private key without a passphrase (as
// `gpg --export-secret-keys --armor` writes it), as Flux reads them.
func FromSecret(name string, data map[string][]byte) (*Decrypter, error) {
	d := &Decrypter{}
	var keys []string
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case strings.HasSuffix(k, ".agekey"):
			if err := d.ids.Import(string(data[k])); err != nil {
				return nil, fmt.Errorf("decryption Secret %s, key %s: not age identities: %w", name, k, errors.Unwrap(err))
			}
		case strings.HasSuffix(k, ".asc"):
			entities, err := pgpPrivateKeys(data[k])
			if err != nil {
				return nil, fmt.Errorf("decryption Secret %s, key %s: %w", name, k, err)
			}
			d.pgp = append(d.pgp, entities...)
		}
	}
	if len(d.ids) == 0 && len(d.pgp) == 0 {
		return nil, fmt.Errorf("decryption Secret %s holds no age identity (a key ending in .agekey) and no PGP private key (a key ending in .asc)", name)
	}
	return d, nil
}

// pgpPrivateKeys reads an armored key ring of private keys without a
// passphrase: the controller has no one to ask for it.
func pgpPrivateKeys(armored []byte) (openpgp.EntityList, error) {
	entities, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(armored))
	if err != nil {
		return nil, fmt.Errorf("not an armored PGP key: %w", err)
	}
	for _, e := range entities {
		if e.PrivateKey == nil {
			return nil, fmt.Errorf("PGP key %X is a public key: export the private key (gpg --export-secret-keys --armor)", e.PrimaryKey.Fingerprint)
		}
		if e.PrivateKey.Encrypted {
			return nil, fmt.Errorf("PGP key %X is protected by a passphrase: export a copy without one for the cluster", e.PrimaryKey.Fingerprint)
		}
	}
	return entities, nil
}

// FromFile reads age identities from a file, such as the key file of
// `age-keygen -o`, or an armored PGP private key (strata plan
// --decryption-key-file).
func FromFile(path string) (*Decrypter, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Decrypter{}
	if bytes.Contains(data, []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----")) {
		if d.pgp, err = pgpPrivateKeys(data); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return d, nil
	}
	if err := d.ids.Import(string(data)); err != nil {
		return nil, fmt.Errorf("%s: not age identities: %w", path, errors.Unwrap(err))
	}
	return d, nil
}

// formats are the kinds of file SOPS encrypts, by extension: a marker
// each file SOPS encrypted holds, a cheap test before parsing, and the
// reader, which returns the document and SOPS's entry (nil if none).
var formats = map[string]struct {
	marker string
	read   func([]byte) (document, map[string]any, error)
}{
	".yaml": {"sops", readYAML},
	".yml":  {"sops", readYAML},
	".json": {"sops", readJSON},
	".env":  {"sops_mac", readDotenv},
	".ini":  {"[sops]", readINI},
}

// read reads a file SOPS may have encrypted: its document and SOPS's
// entry; ok is false for a file SOPS did not encrypt (no entry with a
// MAC, or not in a format SOPS writes).
func read(name string, data []byte) (doc document, md metadata, ok bool, err error) {
	f, known := formats[strings.ToLower(filepath.Ext(name))]
	if !known || !bytes.Contains(data, []byte(f.marker)) {
		return nil, md, false, nil
	}
	doc, meta, err := f.read(data)
	if err != nil || meta == nil || text(meta["mac"]) == "" {
		return nil, md, false, nil // not SOPS's: a plain file that mentions it
	}
	md, err = metadataOf(meta)
	if err != nil {
		return nil, md, false, fmt.Errorf("%w: %s: %v", ErrDecryptionFailed, name, err)
	}
	return doc, md, true, nil
}

// Encrypted says whether data is a file SOPS encrypted: it carries SOPS's
// metadata with a MAC.
func Encrypted(name string, data []byte) bool {
	_, _, ok, err := read(name, data)
	return ok || err != nil
}

// File decrypts a file SOPS encrypted; plain is whether it was one.
// The error names the file and the recipients it was encrypted for,
// never a value.
func (d *Decrypter) File(name string, data []byte) (out []byte, plain bool, err error) {
	doc, md, ok, err := read(name, data)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return data, false, nil
	}
	key, ok := d.dataKey(md)
	if !ok {
		return nil, false, fmt.Errorf("%w: %s is encrypted for %s, and no identity of the decryption Secret opens it",
			ErrDecryptionFailed, name, strings.Join(md.recipients(), ", "))
	}
	leaves, err := doc.leaves(key)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrDecryptionFailed, name, err)
	}
	opened, err := openLeaves(leaves, key, md)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrDecryptionFailed, name, err)
	}
	if d.revealed != nil {
		d.revealed.add(opened)
	}
	out, err = doc.emit()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: writing the decrypted file", ErrDecryptionFailed, name)
	}
	return out, true, nil
}

// maxDataKey bounds a decrypted data key: SOPS's are 32 bytes.
const maxDataKey = 1 << 10

// decryptPGP opens an armored PGP message with the private keys.
func (d *Decrypter) decryptPGP(ciphertext []byte) ([]byte, error) {
	if len(d.pgp) == 0 {
		return nil, errors.New("no PGP private key")
	}
	block, err := armor.Decode(bytes.NewReader(ciphertext))
	if err != nil {
		return nil, err
	}
	md, err := openpgp.ReadMessage(block.Body, d.pgp, nil, nil)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(md.UnverifiedBody, maxDataKey))
}
