// Package decrypt decrypts what SOPS encrypted in a Kustomization's
// files, as Flux's kustomize-controller does for spec.decryption
// (provider sops), with the SOPS project's own library and age's: the
// keys are the age identities (*.agekey entries) of the Secret the
// Kustomization names, held in memory only. Plaintext exists only in the
// build's memory: never on disk, in an error, a log or an event.
package decrypt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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

// Decrypter decrypts with a set of age identities.
type Decrypter struct {
	ids sopsage.ParsedIdentities
}

// FromSecret reads the age identities of a decryption Secret's data:
// every key ending in .agekey, each holding one or more identities.
// Entries of other kinds (*.asc PGP keys) are named as not served.
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
			return nil, fmt.Errorf("decryption Secret %s, key %s: PGP keys are not served yet; use age (*.agekey)", name, k)
		}
	}
	if len(d.ids) == 0 {
		return nil, fmt.Errorf("decryption Secret %s holds no age identity (a key ending in .agekey)", name)
	}
	return d, nil
}

// FromFile reads age identities from a file, such as the key file of
// `age-keygen -o` (strata plan --decryption-key-file).
func FromFile(path string) (*Decrypter, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Decrypter{}
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
	if _, err := common.DecryptTree(common.DecryptTreeOpts{Cipher: aes.NewCipher(), Tree: &tree,
		KeyServices: []keyservice.KeyServiceClient{ageKeyService{d.ids}}}); err != nil {
		return nil, false, fmt.Errorf("%w: %s is encrypted for %s, and no identity of the decryption Secret opens it",
			ErrDecryptionFailed, name, strings.Join(recipients(tree), ", "))
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

// ageKeyService decrypts data keys with the identities in memory, in
// place of SOPS's local key service, which reads them from the
// environment and the user's files.
type ageKeyService struct {
	ids sopsage.ParsedIdentities
}

func (s ageKeyService) Decrypt(_ context.Context, in *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	k := in.GetKey().GetAgeKey()
	if k == nil {
		return nil, errors.New("only age keys are served")
	}
	mk := &sopsage.MasterKey{Recipient: k.GetRecipient(), EncryptedKey: string(in.GetCiphertext())}
	s.ids.ApplyToMasterKey(mk)
	plain, err := mk.Decrypt()
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

func (s ageKeyService) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("the decryption key service does not encrypt")
}
