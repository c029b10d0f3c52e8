// Package btrfsnode is the btrfs backend on a node: it keeps tenants'
// volumes and snapshots as btrfs subvolumes, with quotas and NFS exports,
// their replication pairs and their fence, in this layout:
//
//	{base}/{tenant}/{volume}/data                 the volume (a subvolume)
//	{base}/{tenant}/{volume}/metadata.json
//	{base}/{tenant}/snapshots/{name}/data         a read-only snapshot
//	{base}/{tenant}/snapshots/{name}/metadata.json
//
// metadata.json is written last on create and removed first on delete,
// so a volume exists exactly when its metadata does; a directory without
// it is what a crash left half-made or half-removed, and Sweep clears it.
package btrfsnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/strata-gitops/strata/internal/atomicfile"
	"github.com/strata-gitops/strata/internal/groupcommit"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/btrfs"
	"github.com/strata-gitops/strata/storage/nfs"
)

// Store is the volumes of every tenant on one btrfs filesystem.
type Store struct {
	Base string
	FS   *btrfs.Filesystem
	// Exporter serves the volumes' NFS exports; nil serves none.
	Exporter nfs.Exporter
	// Node is the name of the node the store is on, reported with each
	// volume so that a CSI node on the same host can skip NFS.
	Node    string
	MinSize int64

	// Notice reports an action on stored data that an admin should
	// see, such as a leftover moved to quarantine; nil reports nothing.
	Notice func(reason, message string)
	// Quotas bound tenants' volumes and snapshots; set before use.
	Quotas map[string]Quota

	// groups are the tenants' qgroups made so far; adopted, the nested
	// subvolumes reported; reserved, the sizes of the volumes being made
	// (reserveVolume).
	groups, adopted, reserved sync.Map
	// sizes are the tenants' recorded volume sizes (volumeSizes).
	sizesMu sync.Mutex
	sizes   map[string]map[string]int64

	locks keyedMutex
	// exports guards the export index.
	exports sync.Mutex
	index   *exportIndex
	// served batches export changes: each takes a ticket after changing
	// the index, and one Exporter.Sync serves every change ticketed
	// before it started.
	served groupcommit.Group
	// committed batches the filesystem commits that make changes
	// durable before they are acknowledged (commitDurably).
	committed groupcommit.Group
}

// MarkerFile marks a base directory as the store's own. The store
// sweeps and quarantines what it finds under its base, so it must never
// take a directory that already holds someone else's files.
const MarkerFile = ".strata-volumes"

// Open returns the store under base, which must be on btrfs and either
// empty, new, or already the store's (it holds MarkerFile).
func Open(ctx context.Context, base string, exporter nfs.Exporter, node string) (*Store, error) {
	base, err := filepath.Abs(base)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(base)); err != nil {
		return nil, err
	}
	fs, err := btrfs.Open(ctx, base)
	if err != nil {
		return nil, err
	}
	if err := claimBase(base); err != nil {
		return nil, err
	}
	return &Store{Base: base, FS: fs, Exporter: exporter, Node: node, MinSize: DefaultMinSize}, nil
}

const (
	metadataFile = "metadata.json"
	dataDir      = "data"
)

func (s *Store) volumeDir(tenant, name string) string { return filepath.Join(s.Base, tenant, name) }
func (s *Store) snapshotDir(tenant, name string) string {
	return filepath.Join(s.Base, tenant, contract.SnapshotsDir, name)
}

// readMetadata reads dir's metadata into v; contract.NotFound when there is none.
func readMetadata(dir, what string, v any) error {
	data, err := os.ReadFile(filepath.Join(dir, metadataFile))
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(data) == 0 {
		// Empty, it is a record whose create crashed before its commit.
		return contract.Errorf(contract.NotFound, "%s not found", what)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %s is damaged: %w", what, filepath.Join(dir, metadataFile), err)
	}
	return nil
}

// recordNew writes a new volume's, snapshot's or pair's record once what
// it describes is made. It is not yet durable: the change's commitDurably waits
// for the commit that makes it so. A crash before that commit leaves the
// record whole, empty (its name committed before its contents) or
// absent; readMetadata takes an empty one for none.
func recordNew(dir string, v any) error { return writeRecord(atomicfile.WriteCache, dir, v) }

// removeRecord removes dir's metadata before what it describes goes.
// No sync is needed between the two: btrfs commits its transactions
// whole and in order, so no state after a power cut has the subvolume
// gone and the record kept.
func removeRecord(dir string) error {
	return os.Remove(filepath.Join(dir, metadataFile))
}

// commitDurably, deferred by a change between taking its name's lock and its
// tenant's quota lock, makes a change that succeeded durable before it is
// acknowledged: it waits for a filesystem commit that began after the
// change, one shared with every change made meanwhile (group commit). It
// runs after the quota lock is let go, so that a tenant's changes share
// commits, and before the name's lock is, so that a repeated request is
// never answered with what is not yet on disk.
func (s *Store) commitDurably(err *error) {
	if *err == nil {
		*err = s.committed.Commit(s.FS.Commit)
	}
}

// writeMetadata replaces dir's metadata atomically and durably.
func writeMetadata(dir string, v any) error { return writeRecord(atomicfile.Write, dir, v) }

func writeRecord(write func(path string, data []byte) error, dir string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return write(filepath.Join(dir, metadataFile), append(data, '\n'))
}

// claimBase writes the marker into an empty base, accepts a base that
// has it, and refuses any other: a base such as /srv or /home holds
// files the store must never sweep.
func claimBase(base string) error {
	marker := filepath.Join(base, MarkerFile)
	if _, err := os.Stat(marker); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("btrfs base %s is not empty and has no %s marker, so it is not strata's: "+
			"point --btrfs-base at a new or empty directory (such as %s), "+
			"or, if this directory holds only strata's volumes from before the marker, create the marker with `touch %s`",
			base, MarkerFile, filepath.Join(base, "strata"), marker)
	}
	return atomicfile.Write(marker, []byte("This directory holds strata's btrfs volumes; the agent sweeps what it finds here.\n"))
}

// Tenants lists the tenants that have a directory. Names a tenant cannot
// have, such as the agent's own dot-directories, are left out.
func (s *Store) Tenants() ([]string, error) {
	names, err := listDirs(s.Base)
	kept := names[:0]
	for _, n := range names {
		if contract.CheckName("tenant", n) == nil {
			kept = append(kept, n)
		}
	}
	return kept, err
}

func listDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// keyedMutex serialises the operations on one volume or snapshot.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*sync.Mutex{}
	}
	l, ok := k.locks[key]
	if !ok {
		l = &sync.Mutex{}
		k.locks[key] = l
	}
	k.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Capacity is the size and free space of the filesystem under the base.
func (s *Store) Capacity() (size, free int64, err error) { return btrfs.Free(s.Base) }

var _ contract.Store = (*Store)(nil)
