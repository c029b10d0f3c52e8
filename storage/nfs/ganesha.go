package nfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/internal/mountinfo"
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
	exports, refused := servable(exports)
	exports = sorted(exports)
	old, err := g.Exported(ctx)
	if err != nil {
		return err
	}
	mounted, err := mountPoints()
	if err != nil {
		return err
	}
	exports = slices.DeleteFunc(exports, func(e Export) bool {
		if mounted[e.Path] {
			return false
		}
		err := unix.Mount(e.Path, e.Path, "", unix.MS_BIND, "")
		if err != nil {
			refused[e.Path] = fmt.Errorf("bind-mounting %s onto itself for NFS-Ganesha: %w", e.Path, err)
		}
		return err != nil
	})
	if err := g.writeAndReload(ganeshaConfig(exports)); err != nil {
		return err
	}
	for _, e := range old {
		if mounted[e.Path] && !slices.ContainsFunc(exports, func(n Export) bool { return n.Path == e.Path }) {
			if err := unix.Unmount(e.Path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmounting the bind mount of %s: %w", e.Path, err)
			}
		}
	}
	return refusedError(refused)
}

// writeAndReload replaces the exports file and signals the server, only
// when the exports changed: a server that restarted reads the file at
// start, and a signal sent for nothing every interval is a signal that
// could reach the wrong process.
func (g *Ganesha) writeAndReload(config []byte) error {
	if current, err := os.ReadFile(g.ExportsFile); err == nil && bytes.Equal(current, config) {
		return nil
	}
	// Not synced to disk: the agent writes the file again from its
	// records at start, so a file lost in a power failure costs nothing.
	if err := atomicfile.WriteCache(g.ExportsFile, config); err != nil {
		return fmt.Errorf("writing Ganesha's exports to %s: %w", g.ExportsFile, err)
	}
	return g.reload()
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

// ganeshaConfig writes one EXPORT block per export: NFSv4 only, clients
// on privileged ports only, and every client user squashed to the
// volume's owner, so a client's root is not root on the host and a pod
// running as any user can write its volume.
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
  Squash = All_Squash;
  Anonymous_Uid = %d;
  Anonymous_Gid = %d;
  PrivilegedPort = true;
  SecType = sys;
  FSAL { Name = VFS; }
  CLIENT { Clients = %s; Access_Type = RW; }
}
`, e.ID, e.Path, e.Pseudo, e.UID, e.GID, strings.Join(e.Clients, ", "))
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
	if err := checkIsGanesha(pid, g.PIDFile); err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("telling NFS-Ganesha (pid %d from %s) to reload its exports: %w", pid, g.PIDFile, err)
	}
	return nil
}

// ganeshaBinary is the name of NFS-Ganesha's executable.
const ganeshaBinary = "ganesha.nfsd"

// checkIsGanesha refuses to signal a pid that is not NFS-Ganesha: after
// the server died its pid may have gone to any process on the host (the
// agent runs with the host's PID namespace). The executable is read from
// /proc/<pid>/exe, or the command name where exe is not readable.
func checkIsGanesha(pid int, pidFile string) error {
	name := ""
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
		name = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	} else if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("NFS-Ganesha is not running: its pid file %s names pid %d, which does not exist", pidFile, pid)
	} else if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		name = strings.TrimSpace(string(comm))
	}
	if name != ganeshaBinary {
		return fmt.Errorf("NFS-Ganesha is not running: its pid file %s names pid %d, which is %q, not %s; not signalling it", pidFile, pid, name, ganeshaBinary)
	}
	return nil
}

// mountPoints is the set of paths something is mounted at. A directory
// bind-mounted onto itself keeps its device number, so only the mount
// table tells it is a mount point.
func mountPoints() (map[string]bool, error) {
	points, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(points))
	for _, p := range points {
		set[p.MountPoint] = true
	}
	return set, nil
}

// MountPath implements Exporter: Ganesha shows exports at their NFSv4
// pseudo paths.
func (g *Ganesha) MountPath(e Export) string { return e.Pseudo }
