package decrypt

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/shamir"
)

// metadata is what a file's sops entry says of how to open it.
type metadata struct {
	// groups are the key groups: each holds the data key (or, with more
	// than one group, a Shamir share of it) wrapped for each of its keys.
	groups    [][]wrappedKey
	threshold int
	// lastModified is the additional data of the MAC's envelope.
	lastModified string
	mac          string
	// macOnlyEncrypted: the MAC covers only the values SOPS encrypted.
	macOnlyEncrypted bool
}

// wrappedKey is the data key wrapped for one key: kind is age, pgp or a
// key service strata does not serve (kms, gcp_kms, azure_kv, hc_vault,
// hckms), id names the key.
type wrappedKey struct {
	kind, id, enc string
}

// maxKeys bounds the keys a file names: each is an attempt to unwrap the
// data key, and a file from Git must not make a render do thousands.
const maxKeys = 64

// keyKinds are the kinds of key SOPS writes, and the field that names
// each key.
var keyKinds = []struct{ kind, id string }{
	{"age", "recipient"}, {"pgp", "fp"}, {"kms", "arn"}, {"gcp_kms", "resource_id"},
	{"azure_kv", "vault_url"}, {"hc_vault", "vault_address"}, {"hckms", "key_id"},
}

// metadataOf reads a file's sops entry, as a tree of maps and lists.
func metadataOf(tree map[string]any) (metadata, error) {
	md := metadata{mac: text(tree["mac"])}
	last, err := time.Parse(time.RFC3339, text(tree["lastmodified"]))
	if err != nil {
		return md, errors.New("sops.lastmodified is not an RFC 3339 time")
	}
	// SOPS authenticates the MAC with the time as it formats it.
	md.lastModified = last.Format(time.RFC3339)
	md.macOnlyEncrypted, _ = strconv.ParseBool(text(tree["mac_only_encrypted"]))
	if t := text(tree["shamir_threshold"]); t != "" {
		if md.threshold, err = strconv.Atoi(t); err != nil {
			return md, errors.New("sops.shamir_threshold is not a number")
		}
	}
	// One group is written at the top; several under key_groups.
	if top := keysOf(tree); len(top) > 0 {
		md.groups = [][]wrappedKey{top}
	} else {
		for _, g := range list(tree["key_groups"]) {
			group, _ := g.(map[string]any)
			md.groups = append(md.groups, keysOf(group))
		}
	}
	if len(md.groups) == 0 {
		return md, errors.New("its sops entry names no key: encrypt it again with sops for an age or PGP key")
	}
	if n := len(md.recipients()); n > maxKeys {
		return md, fmt.Errorf("its sops entry names %d keys, more than the %d a file may be encrypted for", n, maxKeys)
	}
	if md.threshold == 0 {
		md.threshold = len(md.groups)
	}
	return md, nil
}

// keysOf are the wrapped keys of a group.
func keysOf(group map[string]any) []wrappedKey {
	var keys []wrappedKey
	for _, k := range keyKinds {
		for _, e := range list(group[k.kind]) {
			entry, _ := e.(map[string]any)
			keys = append(keys, wrappedKey{kind: k.kind, id: text(entry[k.id]), enc: text(entry["enc"])})
		}
	}
	return keys
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// text is a scalar of the metadata as text: the flat formats hold every
// value as a string.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	return fmt.Sprint(v)
}

// recipients name the keys a file was encrypted for, as kind:id.
func (md metadata) recipients() []string {
	var out []string
	for _, g := range md.groups {
		for _, k := range g {
			out = append(out, k.kind+":"+k.id)
		}
	}
	if len(out) == 0 {
		out = []string{"no recipient"}
	}
	return out
}

// dataKey unwraps the file's data key with the Decrypter's keys: from
// its one group, or from threshold groups' shares.
func (d *Decrypter) dataKey(md metadata) ([]byte, bool) {
	var shares [][]byte
	for _, g := range md.groups {
		if share, ok := d.unwrap(g); ok {
			shares = append(shares, share)
		}
	}
	if len(md.groups) == 1 {
		return firstOf(shares)
	}
	if len(shares) < md.threshold {
		return nil, false
	}
	key, err := shamir.Combine(shares)
	return key, err == nil
}

func firstOf(shares [][]byte) ([]byte, bool) {
	if len(shares) == 0 {
		return nil, false
	}
	return shares[0], true
}

// unwrap opens a group's data key with the first of its keys the
// Decrypter holds, age keys before PGP keys as SOPS tries them.
func (d *Decrypter) unwrap(group []wrappedKey) ([]byte, bool) {
	for _, kind := range []string{"age", "pgp"} {
		for _, k := range group {
			if k.kind != kind {
				continue
			}
			if key, err := d.unwrapOne(k); err == nil {
				return key, true
			}
		}
	}
	return nil, false
}

func (d *Decrypter) unwrapOne(k wrappedKey) ([]byte, error) {
	if k.kind == "pgp" {
		return d.decryptPGP([]byte(k.enc))
	}
	if len(d.ids) == 0 {
		return nil, errors.New("no age identity")
	}
	mk := &sopsage.MasterKey{Recipient: k.id, EncryptedKey: k.enc}
	d.ids.ApplyToMasterKey(mk)
	return mk.Decrypt()
}
