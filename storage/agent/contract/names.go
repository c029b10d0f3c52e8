package contract

import (
	"fmt"
	"strings"
)

// MaxNameLength bounds volume, snapshot and tenant names, in bytes.
const MaxNameLength = 128

// SnapshotsDir holds a tenant's snapshots beside its volumes, so no
// volume may take its name.
const SnapshotsDir = "snapshots"

// nameChars is the characters a name may hold. Names travel into NFS
// export blocks, mountinfo and command lines; a quote, a space or a bidi
// mark in one tenant's name could break every tenant's exports, so only
// characters that need no quoting anywhere are taken.
const nameChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-"

// CheckName refuses a name that could not be one directory of the
// layout, saying which rule it breaks. kind says what is named, for the
// message.
func CheckName(kind, name string) error {
	bad := func(rule string) error { return Invalidf("%s name %q %s", kind, name, rule) }
	switch {
	case name == "":
		return Invalidf("%s name is empty", kind)
	case len(name) > MaxNameLength:
		return bad(fmt.Sprintf("is %d bytes long; the limit is %d", len(name), MaxNameLength))
	case strings.HasPrefix(name, "."):
		return bad("starts with a dot; such names are the agent's own")
	case strings.HasPrefix(name, "-"):
		return bad("starts with '-', which tools would read as an option")
	case kind == "volume" && name == SnapshotsDir:
		return bad("is reserved: it holds the tenant's snapshots")
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return !strings.ContainsRune(nameChars, r) }); i >= 0 {
		return bad(fmt.Sprintf("contains %q at byte %d; use only letters, digits and . _ + -", name[i:i+1], i))
	}
	return nil
}
