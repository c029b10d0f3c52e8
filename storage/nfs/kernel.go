package nfs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-gitops/strata/internal/command"
)

// Kernel exports through the kernel's NFS server with exportfs, as
// btrfs-nfs-csi does. It manages the exports under Root and no others.
type Kernel struct {
	Root   string
	Runner command.Runner
}

// NewKernel returns the kernel exporter of the exports under root.
func NewKernel(root string) *Kernel {
	return &Kernel{Root: filepath.Clean(root), Runner: command.Exec{}}
}

// kernelOptions are every export's options: clients on privileged ports
// (secure) and every client user squashed to the volume's owner, added
// per export with fsid, which subvolumes need because they share their
// filesystem's UUID. no_subtree_check: each export is a whole subvolume.
const kernelOptions = "rw,sync,secure,no_subtree_check,all_squash"

// Sync implements Exporter: it adds what is missing and removes what is
// no longer wanted, client by client, so that a client that stays keeps
// its export throughout.
func (k *Kernel) Sync(ctx context.Context, exports []Export) error {
	exports, refused := servable(exports)
	have, err := k.Exported(ctx)
	if err != nil {
		return err
	}
	want := clientsByPath(sorted(exports))
	for _, e := range sorted(exports) {
		// exportfs takes a path that is not there, with a warning (the
		// server then serves whatever is mounted there later), and
		// follows links.
		if err := k.servablePath(e.Path); err != nil {
			refused[e.Path] = err
			delete(want, e.Path)
			continue
		}
		for _, c := range e.Clients {
			if slices.Contains(clientsByPath(have)[e.Path], c) {
				continue
			}
			opts := fmt.Sprintf("%s,anonuid=%d,anongid=%d,fsid=%d", kernelOptions, e.UID, e.GID, e.ID)
			if _, err := k.Runner.Run(ctx, "exportfs", "-i", "-o", opts, c+":"+e.Path); err != nil {
				refused[e.Path] = err // the others are still served
			}
		}
	}
	for _, e := range have {
		for _, c := range e.Clients {
			if !slices.Contains(want[e.Path], c) {
				if _, err := k.Runner.Run(ctx, "exportfs", "-u", c+":"+e.Path); err != nil {
					return err
				}
			}
		}
	}
	return refusedError(refused)
}

func clientsByPath(exports []Export) map[string][]string {
	m := map[string][]string{}
	for _, e := range exports {
		m[e.Path] = e.Clients
	}
	return m
}

// Exported implements Exporter from `exportfs -s`: one line per path and
// client, "path  client(options)".
func (k *Kernel) Exported(ctx context.Context) ([]Export, error) {
	out, err := k.Runner.Run(ctx, "exportfs", "-s")
	if err != nil {
		return nil, err
	}
	byPath := map[string]*Export{}
	var order []string
	lines := bufio.NewScanner(bytes.NewReader(out))
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 2 || !strings.HasPrefix(fields[0], k.Root+string(os.PathSeparator)) {
			continue
		}
		e, ok := byPath[fields[0]]
		if !ok {
			e = &Export{Path: fields[0], Pseudo: fields[0]}
			byPath[fields[0]], order = e, append(order, fields[0])
		}
		for _, f := range fields[1:] {
			client, opts, _ := strings.Cut(strings.TrimSuffix(f, ")"), "(")
			e.Clients = append(e.Clients, client)
			for _, o := range strings.Split(opts, ",") {
				if v, ok := strings.CutPrefix(o, "fsid="); ok {
					id, _ := strconv.ParseUint(v, 10, 16)
					e.ID = uint16(id)
				}
			}
		}
	}
	// In the order of their paths, as every Exporter lists them; the
	// export table's own order is the order exports were made in.
	slices.Sort(order)
	var exports []Export
	for _, p := range order {
		slices.Sort(byPath[p].Clients)
		exports = append(exports, *byPath[p])
	}
	return exports, nil
}

// MountPath implements Exporter: the kernel's NFSv4 server shows exports
// at their own paths.
func (k *Kernel) MountPath(e Export) string { return e.Path }

// servablePath says why path cannot be exported unless it is a folder
// below the exporter's root reached through no link: exportfs follows
// links, and a volume's folder replaced by one would export what it
// points to.
func (k *Kernel) servablePath(path string) error {
	rel, err := filepath.Rel(k.Root, path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("export of %s: not below the exporter's root %s", path, k.Root)
	}
	p := k.Root
	for _, part := range strings.Split(rel, string(os.PathSeparator)) {
		p = filepath.Join(p, part)
		info, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("export of %s: %w", path, err)
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("export of %s: %s is a link; only a volume's own folder is exported", path, p)
		}
		if !info.IsDir() {
			return fmt.Errorf("export of %s: %s is not a directory", path, p)
		}
	}
	return nil
}
