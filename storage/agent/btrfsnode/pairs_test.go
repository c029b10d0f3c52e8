package btrfsnode_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/testing/sendstream"
	"github.com/strata-gitops/strata/internal/testing/testenv"
	"github.com/strata-gitops/strata/storage/agent/btrfsnode"
	"github.com/strata-gitops/strata/storage/agent/contract"
	"github.com/strata-gitops/strata/storage/agent/volumeapi/wire"
)

const pairToken = "0123456789abcdef0123456789abcdef"

// pairedStores are two stores on two btrfs filesystems, as two nodes
// have, with volume db on each and pair p between them.
func pairedStores(t *testing.T) (a, b *btrfsnode.Store) {
	t.Helper()
	a, b = newStore(t, nil), newStore(t, nil)
	for _, s := range []*btrfsnode.Store{a, b} {
		if _, _, err := s.Create(context.Background(), "t", btrfsnode.CreateRequest{Name: "db", SizeBytes: 256 * mib}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetPair(context.Background(), "t", "p", wire.PairRequest{Volume: "db", Token: pairToken}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// syncPair sends the next replica of pair p from one store to the
// other, cutting the stream after cut(stream) bytes when cut is not nil,
// and returns the stream's length.
func syncPair(t *testing.T, from, to *btrfsnode.Store, cut func([]byte) int64) (int64, error) {
	t.Helper()
	ctx := context.Background()
	peer, err := to.GetPair(context.Background(), "t", "p")
	if err != nil {
		t.Fatal(err)
	}
	out, err := from.SnapshotForSend(ctx, "t", "p", peer.Replicas)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := out.Stream(ctx, &stream); err != nil {
		t.Fatal(err)
	}
	sent := int64(stream.Len())
	body := io.Reader(&stream)
	if cut != nil {
		body = io.LimitReader(&stream, cut(stream.Bytes()))
	}
	counted := &countingReader{r: body}
	_, err = to.Receive(ctx, "t", "p", out.Seq, out.Parent, out.MadeAt, counted, func() error {
		if counted.n != sent {
			return fmt.Errorf("%d of %d stream bytes arrived", counted.n, sent)
		}
		return nil
	})
	if err == nil {
		err = from.Sent(ctx, "t", "p", out.Seq)
	}
	return sent, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func writeRandom(t *testing.T, s *btrfsnode.Store, file string, size int) []byte {
	t.Helper()
	v, err := s.Get("t", "db")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Path, file), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// wantFile promotes the pair on s and checks that its volume then holds
// file with exactly data.
func wantPromoted(t *testing.T, s *btrfsnode.Store, files map[string][]byte) {
	t.Helper()
	v, err := s.Promote(context.Background(), "t", "p")
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range files {
		got, err := os.ReadFile(filepath.Join(v.Path, file))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("after promotion %s holds %d bytes (%v), want the %d bytes written on the other side", file, len(got), err, len(data))
		}
	}
	if u, err := s.FS.Usage(v.Path); err != nil || u.Limit != 256*mib {
		t.Fatalf("promoted volume's quota = %+v, %v; want its 256 MiB limit", u, err)
	}
}

func TestSyncsAreWholeThenIncremental(t *testing.T) {
	a, b := pairedStores(t)
	first := writeRandom(t, a, "first", 16*mib)
	full, err := syncPair(t, a, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	second := writeRandom(t, a, "second", 1*mib)
	delta, err := syncPair(t, a, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("whole stream %d bytes, incremental stream %d bytes after 1 MiB changed", full, delta)
	if full < 16*mib || delta < 1*mib || delta > 2*mib {
		t.Fatalf("streams of %d and %d bytes; want the whole 16 MiB, then only the 1 MiB that changed", full, delta)
	}
	p, err := b.GetPair(context.Background(), "t", "p")
	if err != nil || p.Latest != 2 || p.LatestAt == nil {
		t.Fatalf("destination = %+v, %v; want replica 2 with its time", p, err)
	}
	wantPromoted(t, b, map[string][]byte{"first": first, "second": second})
	wantOnlyReplica(t, a, 2)
	wantOnlyReplica(t, b, 2)
}

// wantOnlyReplica checks that the pair holds replica seq and nothing
// else: older replicas and cut-off streams are gone.
func wantOnlyReplica(t *testing.T, s *btrfsnode.Store, seq uint64) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Base, "t", ".pairs", "p"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := fmt.Sprintf("%d metadata.json", seq); strings.Join(names, " ") != want {
		t.Fatalf("the pair's directory holds %v, want %s", names, want)
	}
}

func TestACutStreamKeepsTheLastReplica(t *testing.T) {
	a, b := pairedStores(t)
	first := writeRandom(t, a, "first", 4*mib)
	if _, err := syncPair(t, a, b, nil); err != nil {
		t.Fatal(err)
	}
	writeRandom(t, a, "second", 4*mib)
	cuts := map[string]func([]byte) int64{
		"in its header":        func([]byte) int64 { return 5 },
		"inside a command":     func(stream []byte) int64 { return int64(len(stream) / 2) },
		"between two commands": func(stream []byte) int64 { return commandBoundary(t, stream, len(stream)/2) },
	}
	for where, cut := range cuts {
		if _, err := syncPair(t, a, b, cut); err == nil {
			t.Fatalf("a stream cut %s was taken", where)
		}
		if p, err := b.GetPair(context.Background(), "t", "p"); err != nil || p.Latest != 1 {
			t.Fatalf("after a stream cut %s the destination is %+v, %v; want replica 1 kept", where, p, err)
		}
		wantOnlyReplica(t, b, 1)
	}
	// The next sync still starts from replica 1.
	delta, err := syncPair(t, a, b, nil)
	if err != nil || delta > 5*mib {
		t.Fatalf("the sync after the cut ones sent %d bytes (%v), want only the 4 MiB changed", delta, err)
	}
	wantPromoted(t, b, map[string][]byte{"first": first})
}

func TestFailbackSendsOnlyWhatChangedOnTheBackup(t *testing.T) {
	a, b := pairedStores(t)
	first := writeRandom(t, a, "first", 16*mib)
	if _, err := syncPair(t, a, b, nil); err != nil {
		t.Fatal(err)
	}
	// A sync cut off just before A was lost leaves A a replica B never got.
	writeRandom(t, a, "unsent", 1*mib)
	if _, err := syncPair(t, a, b, func(stream []byte) int64 { return int64(len(stream) / 2) }); err == nil {
		t.Fatal("a cut stream was taken")
	}
	wantPromoted(t, b, map[string][]byte{"first": first})
	// A's copy went stale while B served: B now sends back.
	writeRandom(t, a, "stale", 1*mib)
	during := writeRandom(t, b, "during", 2*mib)
	back, err := syncPair(t, b, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back > 3*mib {
		t.Fatalf("failback sent %d bytes, want only the 2 MiB written on the backup", back)
	}
	wantPromoted(t, a, map[string][]byte{"first": first, "during": during})
	if v, _ := a.Get("t", "db"); fileExists(filepath.Join(v.Path, "stale")) || fileExists(filepath.Join(v.Path, "unsent")) {
		t.Fatal("the old primary still serves what it wrote after its last complete sync")
	}
}

// commandBoundary is the offset of the first command of a btrfs send
// stream that starts at or after offset: a stream cut there ends
// cleanly as far as btrfs receive can tell. A stream is a 17-byte
// header, then commands of a 10-byte header (length, type, checksum)
// and length bytes of attributes.
func commandBoundary(t *testing.T, stream []byte, offset int) int64 {
	t.Helper()
	at := 17
	for at < offset {
		if at+10 > len(stream) {
			t.Fatalf("no command starts after byte %d of a %d-byte stream", offset, len(stream))
		}
		at += 10 + int(binary.LittleEndian.Uint32(stream[at:]))
	}
	return int64(at)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

func TestPairRefusals(t *testing.T) {
	a, _ := pairedStores(t)
	ctx := context.Background()
	_, err := a.SetPair(context.Background(), "t", "q", wire.PairRequest{Volume: "db", Token: "short"})
	wantKind(t, err, contract.Invalid, "a short token")
	_, err = a.SetPair(context.Background(), "t", "q", wire.PairRequest{Volume: "missing", Token: pairToken})
	wantKind(t, err, contract.NotFound, "a pair of a missing volume")
	// Each pair keeps a copy of its volume: a second pair of db would
	// store db's size again outside the tenant's quota.
	_, err = a.SetPair(context.Background(), "t", "q", wire.PairRequest{Volume: "db", Token: pairToken})
	wantKind(t, err, contract.Conflict, "a second pair of one volume")
	if _, err := a.SetPair(context.Background(), "t", "p", wire.PairRequest{Volume: "db", Token: pairToken}); err != nil {
		t.Fatalf("setting the volume's own pair again: %v", err)
	}
	wantKind(t, a.AuthorizePair("t", "p", strings.Repeat("x", 32)), contract.Forbidden, "another token")
	if err := a.AuthorizePair("t", "p", pairToken); err != nil {
		t.Fatalf("the pair's own token: %v", err)
	}
	_, err = a.Promote(ctx, "t", "p")
	wantKind(t, err, contract.NotFound, "promoting with no replica")
	_, err = a.Receive(ctx, "t", "p", 3, 2, time.Now(), strings.NewReader(""), func() error { return nil })
	wantKind(t, err, contract.Conflict, "a stream whose parent this side does not have")
}

// A fenced node's replicated volume refuses writes through a bind mount
// and through a file already open, until the pair is unfenced.
func TestFenceStopsEveryWriter(t *testing.T) {
	a, _ := pairedStores(t)
	ctx := context.Background()
	v, err := a.Get("t", "db")
	if err != nil {
		t.Fatal(err)
	}
	bind := t.TempDir()
	if err := unix.Mount(v.Path, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(bind, unix.MNT_DETACH) }()
	writer, reader := holdOpen(t, bind)
	fenced, err := a.FencePairs(ctx)
	if err != nil || len(fenced) != 1 || fenced[0] != "t/db" {
		t.Fatalf("FencePairs = %v, %v; want t/db", fenced, err)
	}
	if err := writer.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the writer ended with %v, want killed", err)
	}
	if state := processState(t, reader.Process.Pid); state == "Z" {
		t.Fatalf("the reader was stopped too (state %s)", state)
	}
	if err := os.WriteFile(filepath.Join(bind, "new"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("creating a file through a bind mount after the fence: %v, want EROFS", err)
	}
	if p, err := a.GetPair(context.Background(), "t", "p"); err != nil || !p.Fenced {
		t.Fatalf("the fenced pair reads %+v, %v; want fenced", p, err)
	}
	if _, err := a.UnfencePair(ctx, "t", "p"); err != nil {
		t.Fatal(err)
	}
	if p, err := a.GetPair(context.Background(), "t", "p"); err != nil || p.Fenced {
		t.Fatalf("the unfenced pair reads %+v, %v", p, err)
	}
	if err := os.WriteFile(filepath.Join(bind, "new"), nil, 0o644); err != nil {
		t.Fatalf("writing after unfencing: %v", err)
	}
}

// holdOpen starts, in dir, a writer that keeps appending to a file it
// opened once, as a database does, and a reader of the same file, and
// returns once both hold it open.
func holdOpen(t *testing.T, dir string) (writer, reader *exec.Cmd) {
	t.Helper()
	log := filepath.Join(dir, "db.log")
	if err := os.WriteFile(log, []byte("start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writer = exec.Command("sh", "-c", "exec 3>>"+log+"; while :; do echo x >&3; sleep 0.05; done")
	reader = exec.Command("sh", "-c", "exec 3<"+log+"; exec sleep 600")
	for _, p := range []*exec.Cmd{writer, reader} {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Process.Kill() })
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if st, err := os.Stat(log); err != nil || st.Size() <= int64(len("start\n")) {
			return fmt.Errorf("the writer has not written yet: %v", err)
		}
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", reader.Process.Pid)); err != nil || filepath.Base(target) != "db.log" {
			return fmt.Errorf("the reader has not opened the file yet: %q, %v", target, err)
		}
		return nil
	})
	return writer, reader
}

// processState is the state letter of a process in /proc; a killed
// child nobody waited for is a zombie, "Z".
func processState(t *testing.T, pid int) string {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	fields := strings.Fields(string(stat))
	if err != nil || len(fields) < 3 {
		t.Fatalf("reading /proc/%d/stat: %v", pid, err)
	}
	return fields[2]
}

// A peer's stream may not write outside its pair: here, into another
// tenant's volume on the same store through a path that climbs out.
// It is refused as invalid, leaves no replica, and the other tenant's
// file is as it was.
func TestReceiveRefusesAStreamWritingIntoAnotherTenant(t *testing.T) {
	a, _ := pairedStores(t)
	ctx := context.Background()
	other, _, err := a.Create(ctx, "bob", btrfsnode.CreateRequest{Name: "private", SizeBytes: 64 * mib})
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(other.Path, "secret")
	if err := os.WriteFile(secret, []byte("bob's"), 0o600); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Join(a.Base, "t", ".pairs", "p", "1.part", "data"), secret)
	if err != nil {
		t.Fatal(err)
	}
	stream := sendstream.New().Subvolume("data", sendstream.NewUUID()).File(rel, 257, []byte("alice's")).End().Bytes()
	_, err = a.Receive(ctx, "t", "p", 1, 0, time.Now(), bytes.NewReader(stream), func() error { return nil })
	wantKind(t, err, contract.Invalid, "a stream climbing out of its replica")
	if got, err := os.ReadFile(secret); err != nil || string(got) != "bob's" {
		t.Fatalf("bob's file holds %q, %v", got, err)
	}
	if p, err := a.GetPair(context.Background(), "t", "p"); err != nil || len(p.Replicas) != 0 {
		t.Fatalf("the pair holds %+v, %v; want no replica", p, err)
	}
}

// A replica's time is never later than when it began to arrive,
// whatever its sender says: the failover judges data age by it.
func TestAReplicaIsNeverNewerThanItsReceipt(t *testing.T) {
	a, b := pairedStores(t)
	ctx := context.Background()
	out, err := a.SnapshotForSend(ctx, "t", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := out.Stream(ctx, &stream); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	p, err := b.Receive(ctx, "t", "p", out.Seq, out.Parent, before.Add(time.Hour), &stream, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if p.LatestAt == nil || p.LatestAt.After(time.Now()) {
		t.Fatalf("the replica claims to be made at %v, after it arrived (%v)", p.LatestAt, before)
	}
}
