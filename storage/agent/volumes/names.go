package volumes

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLength bounds volume, snapshot and tenant names, in bytes.
const MaxNameLength = 128

// snapshotsDir holds a tenant's snapshots beside its volumes, so no
// volume may take its name.
const snapshotsDir = "snapshots"

// CheckName refuses a name that could not be one directory of the
// layout, saying which rule it breaks. kind says what is named, for the
// message.
func CheckName(kind, name string) error {
	bad := func(rule string) error { return invalid("%s name %q %s", kind, name, rule) }
	switch {
	case name == "":
		return invalid("%s name is empty", kind)
	case len(name) > MaxNameLength:
		return bad(fmt.Sprintf("is %d bytes long; the limit is %d", len(name), MaxNameLength))
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case name == "." || name == "..":
		return bad("is a relative path element")
	case strings.ContainsRune(name, '/'):
		return bad("contains '/'; a name is one path element")
	case strings.HasPrefix(name, "."):
		return bad("starts with a dot; such names are the agent's own")
	case strings.ContainsFunc(name, unicode.IsControl):
		return bad("contains a control character")
	case kind == "volume" && name == snapshotsDir:
		return bad("is reserved: it holds the tenant's snapshots")
	}
	return nil
}
