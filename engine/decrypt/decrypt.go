// Package decrypt decrypts what SOPS encrypted in a Kustomization's
// files, as Flux's kustomize-controller does for spec.decryption
// (provider sops), with the SOPS project's own library, age's and the
// OpenPGP library SOPS uses: the keys are the age identities (*.agekey
// entries) and PGP private keys (*.asc) of the Secret the Kustomization
// names, held in memory only. Plaintext exists only in the
// build's memory: never on disk, in an error, a log or an event.
package decrypt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/common"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"google.golang.org/grpc"
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

// formatOf is the SOPS format of a file by its name, and whether SOPS
// encrypts files of that kind.
func formatOf(name string) (formats.Format, bool) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		return formats.Yaml, true
	case ".json":
		return formats.Json, true
	case ".env":
		return formats.Dotenv, true
	case ".ini":
		return formats.Ini, true
	}
	return formats.Binary, false
}

// Encrypted says whether data is a file SOPS encrypted: it carries SOPS's
// metadata with a MAC.
func Encrypted(name string, data []byte) bool {
	f, ok := formatOf(name)
	if !ok || !looksEncrypted(f, data) {
		return false
	}
	store := common.StoreForFormat(f, config.NewStoresConfig())
	tree, err := store.LoadEncryptedFile(data)
	return err == nil && tree.Metadata.MessageAuthenticationCode != ""
}

// looksEncrypted is a cheap test before parsing: SOPS's metadata key.
func looksEncrypted(f formats.Format, data []byte) bool {
	switch f {
	case formats.Dotenv:
		return strings.Contains(string(data), "sops_mac")
	case formats.Ini:
		return strings.Contains(string(data), "[sops]")
	}
	return strings.Contains(string(data), "sops")
}

// File decrypts a file SOPS encrypted; plain is whether it was one.
// The error names the file and the recipients it was encrypted for,
// never a value.
func (d *Decrypter) File(name string, data []byte) (out []byte, plain bool, err error) {
	f, ok := formatOf(name)
	if !ok || !looksEncrypted(f, data) {
		return data, false, nil
	}
	store := common.StoreForFormat(f, config.NewStoresConfig())
	tree, err := store.LoadEncryptedFile(data)
	if err != nil || tree.Metadata.MessageAuthenticationCode == "" {
		return data, false, nil // not SOPS's: a plain file that mentions it
	}
	encrypted := encryptedLeaves(tree.Branches)
	if _, err := common.DecryptTree(common.DecryptTreeOpts{Cipher: aes.NewCipher(), Tree: &tree,
		KeyServices: []keyservice.KeyServiceClient{memoryKeyService{d.ids, d.pgp}}}); err != nil {
		return nil, false, fmt.Errorf("%w: %s is encrypted for %s, and no identity of the decryption Secret opens it",
			ErrDecryptionFailed, name, strings.Join(recipients(tree), ", "))
	}
	if d.revealed != nil {
		d.revealed.add(plaintextsAt(tree.Branches, encrypted))
	}
	out, err = store.EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: writing the decrypted file", ErrDecryptionFailed, name)
	}
	return out, true, nil
}

// recipients are the keys a file was encrypted for, as the error names
// them.
func recipients(tree sops.Tree) []string {
	var out []string
	for _, group := range tree.Metadata.KeyGroups {
		for _, k := range group {
			out = append(out, k.TypeToIdentifier()+":"+k.ToString())
		}
	}
	if len(out) == 0 {
		out = []string{"no recipient"}
	}
	return out
}

// memoryKeyService decrypts data keys with the keys in memory, in place
// of SOPS's local key service, which reads them from the environment, the
// user's files and the gpg program.
type memoryKeyService struct {
	ids sopsage.ParsedIdentities
	pgp openpgp.EntityList
}

// maxDataKey bounds a decrypted data key: SOPS's are 32 bytes.
const maxDataKey = 1 << 10

func (s memoryKeyService) Decrypt(_ context.Context, in *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	if k := in.GetKey().GetPgpKey(); k != nil {
		plain, err := s.decryptPGP(in.GetCiphertext())
		if err != nil {
			return nil, err
		}
		return &keyservice.DecryptResponse{Plaintext: plain}, nil
	}
	k := in.GetKey().GetAgeKey()
	if k == nil {
		return nil, errors.New("only age and PGP keys are served")
	}
	mk := &sopsage.MasterKey{Recipient: k.GetRecipient(), EncryptedKey: string(in.GetCiphertext())}
	s.ids.ApplyToMasterKey(mk)
	plain, err := mk.Decrypt()
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

// decryptPGP opens an armored PGP message with the private keys.
func (s memoryKeyService) decryptPGP(ciphertext []byte) ([]byte, error) {
	if len(s.pgp) == 0 {
		return nil, errors.New("no PGP private key")
	}
	block, err := armor.Decode(bytes.NewReader(ciphertext))
	if err != nil {
		return nil, err
	}
	md, err := openpgp.ReadMessage(block.Body, s.pgp, nil, nil)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(md.UnverifiedBody, maxDataKey))
}

func (s memoryKeyService) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("the decryption key service does not encrypt")
}
