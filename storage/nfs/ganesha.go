package nfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"

	"github.com/strata-gitops/strata/internal/atomicfile"
)

// Ganesha exports through NFS-Ganesha. It owns one file of EXPORT blocks,
// which the server's configuration includes (%include), and tells the
// server to read it again with SIGHUP.
//
// Ganesha as Debian builds it does not see btrfs subvolumes below a
// mount point (it is built without libbtrfsutil), so every exported
// directory is first bind-mounted onto itself, which makes it a mount
// point Ganesha does see; the bind mount goes when the export goes.
type Ganesha struct {
	// ExportsFile holds strata's EXPORT blocks.
	ExportsFile string
	// PIDFile is the running server's pid file (ganesha.nfsd -p).
	PIDFile string
}

// stateLine starts the comment line in which the exports file records,
// as JSON, the exports it holds.
const stateLine = "# strata exports: "

// Sync implements Exporter.
func (g *Ganesha) Sync(ctx context.Context, exports []Export) error {
	if err := check(exports); err != nil {
		return err
	}
	exports = sorted(exports)
	old, err := g.Exported(ctx)
	if err != nil {
		return err
	}
	for _, e := range exports {
		if err := selfBind(e.Path); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(g.ExportsFile, ganeshaConfig(exports)); err != nil {
		return fmt.Errorf("writing Ganesha's exports to %s: %w", g.ExportsFile, err)
	}
	if err := g.reload(); err != nil {
		return err
	}
	for _, e := range old {
		if !slices.ContainsFunc(exports, func(n Export) bool { return n.Path == e.Path }) {
			if err := unbind(e.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

// Exported implements Exporter from the exports file: what Ganesha was
// last told to serve.
func (g *Ganesha) Exported(context.Context) ([]Export, error) {
	data, err := os.ReadFile(g.ExportsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Ganesha's exports: %w", err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	state, ok := bytes.CutPrefix(line, []byte(stateLine))
	if !ok {
		return nil, fmt.Errorf("%s was not written by strata (its first line is not %q); move it away or point --ganesha-exports elsewhere",
			g.ExportsFile, strings.TrimSpace(stateLine))
	}
	var exports []Export
	if err := json.Unmarshal(state, &exports); err != nil {
		return nil, fmt.Errorf("%s: the strata state line: %w", g.ExportsFile, err)
	}
	return exports, nil
}

// ganeshaConfig writes one EXPORT block per export, NFSv4 only, root not
// squashed: a volume's owner is set by the agent, and pods run as any
// user.
func ganeshaConfig(exports []Export) []byte {
	state, _ := json.Marshal(exports)
	var b strings.Builder
	b.WriteString(stateLine)
	b.Write(state)
	b.WriteString("\n# Written by the strata agent; changes here are overwritten.\n")
	for _, e := range exports {
		fmt.Fprintf(&b, `EXPORT {
  Export_Id = %d;
  Path = "%s";
  Pseudo = "%s";
  Protocols = 4;
  Access_Type = None;
  Squash = No_Root_Squash;
  SecType = sys;
  FSAL { Name = VFS; }
  CLIENT { Clients = %s; Access_Type = RW; }
}
`, e.ID, e.Path, e.Pseudo, strings.Join(e.Clients, ", "))
	}
	return []byte(b.String())
}

// reload tells the running server to read its exports again.
func (g *Ganesha) reload() error {
	data, err := os.ReadFile(g.PIDFile)
	if err != nil {
		return fmt.Errorf("NFS-Ganesha does not seem to run: its pid file %s: %w", g.PIDFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("NFS-Ganesha's pid file %s holds %q, not a pid", g.PIDFile, data)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("telling NFS-Ganesha (pid %d from %s) to reload its exports: %w", pid, g.PIDFile, err)
	}
	return nil
}

// selfBind makes path a mount point by bind-mounting it onto itself,
// unless it is one already.
func selfBind(path string) error {
	mounted, err := isMountPoint(path)
	if err != nil || mounted {
		return err
	}
	if err := unix.Mount(path, path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s onto itself for NFS-Ganesha: %w", path, err)
	}
	return nil
}

// unbind undoes selfBind. A path gone or no longer mounted is done.
func unbind(path string) error {
	mounted, err := isMountPoint(path)
	if errors.Is(err, fs.ErrNotExist) || !mounted {
		return nil
	}
	if err != nil {
		return err
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting the bind mount of %s: %w", path, err)
	}
	return nil
}

// isMountPoint says whether a mount sits exactly at path, from the mount
// table (a bind mount of a directory onto itself keeps its device
// number, so comparing devices would not tell).
func isMountPoint(path string) (bool, error) {
	if _, err := os.Stat(path); err != nil {
		return false, err
	}
	points, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, p := range points {
		if p.MountPoint == path {
			return true, nil
		}
	}
	return false, nil
}

// MountPath implements Exporter: Ganesha shows exports at their NFSv4
// pseudo paths.
func (g *Ganesha) MountPath(e Export) string { return e.Pseudo }
