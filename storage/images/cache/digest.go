package cache

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Digest is an image object's SHA-256, written "sha256:<64 hex digits>".
type Digest string

// ParseDigest reads a SHA-256 as sources declare it: "sha256:<hex>", or
// the bare hex digits, as a .sha256 file beside an object holds them
// (before the object's name, which is ignored).
func ParseDigest(s string) (Digest, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return "", fmt.Errorf("an empty SHA-256: give sha256:<64 hex digits>")
	}
	h := strings.ToLower(strings.TrimPrefix(fields[0], "sha256:"))
	if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
		// What was read is not repeated: it may come from a fetched
		// .sha256 file, and an error reaches events and tenants.
		return "", fmt.Errorf("not a SHA-256 (%d characters): give sha256:<64 hex digits>", len(fields[0]))
	}
	return Digest("sha256:" + h), nil
}

// Hex is the digest's hex digits.
func (d Digest) Hex() string { return strings.TrimPrefix(string(d), "sha256:") }
