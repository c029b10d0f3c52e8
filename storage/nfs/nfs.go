// Package nfs serves directories over NFS through an Exporter: the
// kernel's server (exportfs) or NFS-Ganesha in userspace. Either is
// given the whole set of exports it should serve and makes it so, which
// keeps a restarted agent and a drifted server easy to bring back.
package nfs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"unicode"
)

// Export is one directory served to some clients.
type Export struct {
	// ID is unique among the exports, 1-65535; Ganesha needs one per
	// export and the kernel uses it as the export's fsid.
	ID uint16 `json:"id"`
	// Path is the directory served.
	Path string `json:"path"`
	// Pseudo is the path NFSv4 clients mount, such as /tenant/volume.
	Pseudo string `json:"pseudo"`
	// Clients are the addresses (IPs or CIDRs) allowed to mount it.
	Clients []string `json:"clients"`
	// UID and GID are who every client user acts as (all-squash): the
	// volume's owner. A client's root is never root on the host.
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// RefusedError is the exports a Sync could not serve, each with why; the
// other exports were served. One bad export must not take every other
// tenant's exports down with it.
type RefusedError struct {
	Refused map[string]error // by the export's path
}

func (e *RefusedError) Error() string {
	var msgs []string
	for _, path := range slices.Sorted(maps.Keys(e.Refused)) {
		msgs = append(msgs, e.Refused[path].Error())
	}
	return fmt.Sprintf("%d export(s) refused, the rest served: %s", len(e.Refused), strings.Join(msgs, "; "))
}

// RefusedFor is the reason the export of path was refused by the Sync
// that returned err; nil when it was served. An error of another kind
// concerns every export and is returned as it is.
func RefusedFor(err error, path string) error {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Refused[path]
	}
	return err
}

// Exporter serves a set of exports.
type Exporter interface {
	// Sync makes the exports served exactly these; exports it did not
	// make are left alone.
	Sync(ctx context.Context, exports []Export) error
	// Exported lists the exports served now.
	Exported(ctx context.Context) ([]Export, error)
	// MountPath is the path a client mounts to reach an export.
	MountPath(e Export) string
}

// CheckClient says whether s is an address or a CIDR that an export may
// name as a client.
func CheckClient(s string) error {
	if net.ParseIP(s) != nil {
		return nil
	}
	if _, _, err := net.ParseCIDR(s); err == nil {
		return nil
	}
	return fmt.Errorf("NFS client %q is neither an IP address nor a CIDR", s)
}

// servable returns the exports a server can serve as given, ordered by
// path, and the others with why. Of two that clash, the first by path
// is served.
func servable(exports []Export) ([]Export, map[string]error) {
	exports = slices.Clone(exports)
	slices.SortFunc(exports, func(a, b Export) int { return strings.Compare(a.Path, b.Path) })
	ids, pseudos := map[uint16]string{}, map[string]string{}
	var good []Export
	refused := map[string]error{}
	for _, e := range exports {
		if err := checkOne(e, ids, pseudos); err != nil {
			refused[e.Path] = err
			continue
		}
		ids[e.ID], pseudos[e.Pseudo] = e.Path, e.Path
		good = append(good, e)
	}
	return good, refused
}

// refusedError is a *RefusedError for what was refused, nil for nothing.
func refusedError(refused map[string]error) error {
	if len(refused) == 0 {
		return nil
	}
	return &RefusedError{Refused: refused}
}

// checkOne refuses an export that no server could serve, or that
// clashes with one already taken.
func checkOne(e Export, ids map[uint16]string, pseudos map[string]string) error {
	if e.ID == 0 {
		return fmt.Errorf("export of %s has no ID (0 is the NFSv4 root)", e.Path)
	}
	if other, ok := ids[e.ID]; ok {
		return fmt.Errorf("exports of %s and %s share the ID %d", other, e.Path, e.ID)
	}
	if other, ok := pseudos[e.Pseudo]; ok {
		return fmt.Errorf("exports of %s and %s share the NFSv4 path %s", other, e.Path, e.Pseudo)
	}
	if !strings.HasPrefix(e.Path, "/") || !strings.HasPrefix(e.Pseudo, "/") {
		return fmt.Errorf("export of %s: path and NFSv4 path %q must be absolute", e.Path, e.Pseudo)
	}
	if strings.ContainsFunc(e.Path+e.Pseudo, unsafeInExportTable) {
		return fmt.Errorf("export of %q: a path with quotes, backslashes, spaces, ';', braces or control characters cannot be written in an export table", e.Path)
	}
	if e.UID < 0 || e.GID < 0 {
		return fmt.Errorf("export of %s: owner %d:%d is not a user and group ID", e.Path, e.UID, e.GID)
	}
	for _, c := range e.Clients {
		if err := CheckClient(c); err != nil {
			return fmt.Errorf("export of %s: %w", e.Path, err)
		}
	}
	return nil
}

// unsafeInExportTable is a character that would end or bend a quoted
// path in Ganesha's configuration or the kernel's export table.
func unsafeInExportTable(r rune) bool {
	return strings.ContainsRune("\"\\;{}#", r) || unicode.IsSpace(r) || unicode.IsControl(r) || !unicode.IsPrint(r)
}

// sorted returns the exports ordered by path, with sorted clients, and
// without exports that have no client: those serve nobody.
func sorted(exports []Export) []Export {
	var out []Export
	for _, e := range exports {
		if len(e.Clients) == 0 {
			continue
		}
		e.Clients = slices.Sorted(slices.Values(e.Clients))
		e.Clients = slices.Compact(e.Clients)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Export) int { return strings.Compare(a.Path, b.Path) })
	return out
}
