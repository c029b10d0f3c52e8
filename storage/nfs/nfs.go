// Package nfs serves directories over NFS through an Exporter: the
// kernel's server (exportfs) or NFS-Ganesha in userspace. Either is
// given the whole set of exports it should serve and makes it so, which
// keeps a restarted agent and a drifted server easy to bring back.
package nfs

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
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

// check refuses a set of exports that no server could serve as given.
func check(exports []Export) error {
	ids, pseudos := map[uint16]string{}, map[string]string{}
	for _, e := range exports {
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
		if strings.ContainsAny(e.Path+e.Pseudo, "\"\n\\") {
			return fmt.Errorf("export of %s: a path with quotes, backslashes or new lines cannot be written in an export table", e.Path)
		}
		for _, c := range e.Clients {
			if err := CheckClient(c); err != nil {
				return fmt.Errorf("export of %s: %w", e.Path, err)
			}
		}
		ids[e.ID], pseudos[e.Pseudo] = e.Path, e.Path
	}
	return nil
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
