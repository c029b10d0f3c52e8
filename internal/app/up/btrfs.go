package up

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
)

// btrfsTenant is the tenant the example repository's btrfs StorageClass
// uses, and btrfsTokenSecret the Secret in strata-system its parameters
// name for the token.
const (
	btrfsTenant      = "homelab"
	btrfsTokenSecret = "btrfs-tenant"
	// btrfsBase is the btrfs storage host's disk, mounted in its node.
	btrfsBase = "/var/lib/strata/btrfs"
	// btrfsDisk is which of the host's disks is its btrfs disk.
	btrfsDisk = 3
)

// btrfsToken reads the tenant's token, making one on first run.
func btrfsToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	return token, os.WriteFile(path, []byte(token+"\n"), 0o600)
}
