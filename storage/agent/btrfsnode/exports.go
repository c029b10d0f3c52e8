package btrfsnode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/nfs"
)

// AddExport lets an NFS client (an IP or CIDR) mount the volume.
func (s *Store) AddExport(ctx context.Context, tenant, name, client string) (Volume, error) {
	return s.changeClients(ctx, tenant, name, client, func(clients []string) []string {
		if slices.Contains(clients, client) {
			return clients
		}
		return append(clients, client)
	})
}

// RemoveExport takes an NFS client's access away; removing one that has
// none is done.
func (s *Store) RemoveExport(ctx context.Context, tenant, name, client string) (Volume, error) {
	return s.changeClients(ctx, tenant, name, client, func(clients []string) []string {
		return slices.DeleteFunc(clients, func(c string) bool { return c == client })
	})
}

func (s *Store) changeClients(ctx context.Context, tenant, name, client string, change func([]string) []string) (Volume, error) {
	if err := contract.CheckName("volume", name); err != nil {
		return Volume{}, err
	}
	if err := nfs.CheckClient(client); err != nil {
		return Volume{}, contract.Invalidf("%v", err)
	}
	if s.Exporter == nil {
		return Volume{}, contract.Invalidf("this agent serves no NFS exports (start it with an exporter)")
	}
	defer s.locks.lock(tenant + "/" + name)()
	v, err := s.get(tenant, name)
	if err != nil {
		return Volume{}, err
	}
	return s.setClients(ctx, tenant, v, change(slices.Clone(v.Clients)))
}

// setClients records a volume's clients and serves the exports that
// follow. The record comes first: should serving fail, the periodic
// sync (Run) keeps trying what the record says.
func (s *Store) setClients(ctx context.Context, tenant string, v Volume, clients []string) (Volume, error) {
	slices.Sort(clients)
	v.Clients = clients
	if len(clients) > 0 && v.ExportID == 0 {
		id, err := s.allocateExportID()
		if err != nil {
			return Volume{}, err
		}
		v.ExportID = id
	}
	if err := writeMetadata(s.volumeDir(tenant, v.Name), recordOfVolume(v)); err != nil {
		return Volume{}, err
	}
	v = s.fill(tenant, v)
	ticket, err := s.indexExport(tenant, v)
	if err != nil {
		return Volume{}, err
	}
	if err := nfs.RefusedFor(s.serveExports(ctx, ticket), s.export(tenant, v).Path); err != nil {
		return Volume{}, fmt.Errorf("volume %s: recorded its NFS clients, but serving them failed (the agent keeps trying): %w", v.Name, err)
	}
	return v, nil
}

// indexExport puts a volume's recorded export in the index and returns
// the ticket of that change.
func (s *Store) indexExport(tenant string, v Volume) (uint64, error) {
	s.exports.Lock()
	defer s.exports.Unlock()
	if err := s.loadIndex(); err != nil {
		return 0, err
	}
	s.index.set(tenant, v, s.export(tenant, v))
	return s.served.Ticket(), nil
}

func (s *Store) allocateExportID() (uint16, error) {
	s.exports.Lock()
	defer s.exports.Unlock()
	if err := s.loadIndex(); err != nil {
		return 0, err
	}
	id, err := s.index.freeID()
	if err == nil {
		s.index.ids[id] = true
	}
	return id, err
}

// serveExports returns once a sync that includes the change of the given
// ticket has run, with that sync's error. Changes made while a sync runs
// are served together by the next one, so concurrent exports share the
// exporter's cost.
func (s *Store) serveExports(ctx context.Context, ticket uint64) error {
	return s.served.Wait(ticket, func() error {
		s.exports.Lock()
		exports := s.index.exports()
		s.exports.Unlock()
		return s.Exporter.Sync(ctx, exports)
	})
}

// exportIndex is what the volumes' metadata says about exports, kept in
// memory so that an export change need not read every volume's record:
// the exports to serve, and the export IDs given out.
type exportIndex struct {
	byVolume map[string]nfs.Export
	ids      map[uint16]bool
}

// loadIndex reads the index from the metadata, once. The caller holds
// s.exports.
func (s *Store) loadIndex() error {
	if s.index != nil {
		return nil
	}
	return s.reloadIndex()
}

// reloadIndex reads the index from the metadata afresh. IDs handed out
// before stay taken: one may be allocated to a volume whose record is
// still being written. The caller holds s.exports.
func (s *Store) reloadIndex() error {
	index := &exportIndex{byVolume: map[string]nfs.Export{}, ids: map[uint16]bool{}}
	err := s.eachVolume(func(tenant string, v Volume) { index.set(tenant, v, s.export(tenant, v)) })
	if err != nil {
		return err
	}
	if s.index != nil {
		for id := range s.index.ids {
			index.ids[id] = true
		}
	}
	s.index = index
	return nil
}

func (x *exportIndex) set(tenant string, v Volume, e nfs.Export) {
	x.ids[v.ExportID] = true
	key := tenant + "/" + v.Name
	if len(e.Clients) == 0 {
		delete(x.byVolume, key)
		return
	}
	x.byVolume[key] = e
}

func (x *exportIndex) exports() []nfs.Export {
	out := make([]nfs.Export, 0, len(x.byVolume))
	for _, e := range x.byVolume {
		out = append(out, e)
	}
	return out
}

// freeID is the lowest export ID no volume holds. Volumes keep their ID
// once given, so a client's file handles stay valid.
func (x *exportIndex) freeID() (uint16, error) {
	for id := uint16(1); id != 0; id++ {
		if !x.ids[id] {
			return id, nil
		}
	}
	return 0, contract.Errorf(contract.NoSpace, "all 65535 NFS export IDs are taken")
}

func (s *Store) eachVolume(do func(tenant string, v Volume)) error {
	tenants, err := s.Tenants()
	if err != nil {
		return err
	}
	for _, t := range tenants {
		volumes, err := s.records(t)
		if err != nil {
			return err
		}
		for _, v := range volumes {
			do(t, v)
		}
	}
	return nil
}

// export is the NFS export of a volume: NFSv4 path /{tenant}/{volume}.
func (s *Store) export(tenant string, v Volume) nfs.Export {
	path := filepath.Join(s.volumeDir(tenant, v.Name), dataDir)
	return nfs.Export{ID: v.ExportID, Path: path, Pseudo: "/" + tenant + "/" + v.Name, Clients: v.Clients, UID: v.UID, GID: v.GID}
}

// SyncExports serves exactly the exports the volumes' metadata records,
// which also removes exports of volumes that are gone. It reads the
// metadata afresh, so what was changed behind the agent's back counts.
func (s *Store) SyncExports(ctx context.Context) error {
	if s.Exporter == nil {
		return nil
	}
	s.exports.Lock()
	if err := s.reloadIndex(); err != nil {
		s.exports.Unlock()
		return err
	}
	ticket := s.served.Ticket()
	s.exports.Unlock()
	return s.serveExports(ctx, ticket)
}

// Run brings the exports and the configured tenants' layout in order at
// start, then, every interval until ctx ends, keeps the exports in sync
// (a restarted NFS server, or one changed by hand, is put back) and
// nested subvolumes under their tenant's quota. A failed export sync is
// retried sooner, backing off from a second up to the interval.
func (s *Store) Run(ctx context.Context, interval time.Duration, tenants []string, log logr.Logger) {
	if err := s.Sweep(ctx, tenants); err != nil {
		log.Error(err, "clearing what a crash left in the volume layout")
	}
	backoff := time.Second
	for {
		wait := interval
		var refused *nfs.RefusedError
		if err := s.SyncExports(ctx); errors.As(err, &refused) {
			log.Error(err, "some NFS exports cannot be served; the others are") // retrying soon would not help
			backoff = time.Second
		} else if err != nil {
			log.Error(err, "serving NFS exports; retrying", "in", backoff)
			wait, backoff = backoff, min(2*backoff, interval)
		} else {
			backoff = time.Second
		}
		s.forgetSizes() // records changed by hand count from now on
		if err := s.AdoptNested(ctx); err != nil {
			log.Error(err, "putting nested subvolumes under their tenant's quota")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
