package btrfs_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/strata-gitops/strata/internal/testing/sendstream"
	"github.com/strata-gitops/strata/storage/btrfs"
)

// receiveScene is a filesystem with another tenant's file in its own
// subvolume and a host file outside the filesystem: what a hostile
// stream aims at.
type receiveScene struct {
	fs                *btrfs.Filesystem
	victim, host      string
	victimUUID        [16]byte
	victimData, hostD []byte
}

func newReceiveScene(t *testing.T) *receiveScene {
	t.Helper()
	s := &receiveScene{fs: open(t), victimData: []byte("the other tenant's secret"), hostD: []byte("a host file")}
	vol := filepath.Join(s.fs.Path, "victim")
	if err := s.fs.CreateSubvolume(context.Background(), vol); err != nil {
		t.Fatal(err)
	}
	s.victim = filepath.Join(vol, "secret")
	s.host = filepath.Join(t.TempDir(), "host")
	for path, data := range map[string][]byte{s.victim: s.victimData, s.host: s.hostD} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.victimUUID = subvolumeUUID(t, vol)
	return s
}

// untouched fails the test when anything outside the receiving
// directory changed.
func (s *receiveScene) untouched(t *testing.T) {
	t.Helper()
	for path, want := range map[string][]byte{s.victim: s.victimData, s.host: s.hostD} {
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s holds %q (%v), want %q: the stream reached outside its replica", path, got, err, want)
		}
	}
}

func (s *receiveScene) receive(t *testing.T, dir string, stream []byte, c btrfs.Confinement) error {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if c.Name == "" {
		c.Name = "data"
	}
	return s.fs.Receive(context.Background(), bytes.NewReader(stream), dir, c)
}

func subvolumeUUID(t *testing.T, path string) [16]byte {
	t.Helper()
	out, err := exec.Command("btrfs", "subvolume", "show", path).CombinedOutput()
	if err != nil {
		t.Fatalf("btrfs subvolume show %s: %v: %s", path, err, out)
	}
	m := regexp.MustCompile(`(?m)^\s*UUID:\s*([0-9a-f-]{36})`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no UUID in: %s", out)
	}
	var u [16]byte
	if _, err := hex.Decode(u[:], []byte(strings.ReplaceAll(string(m[1]), "-", ""))); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestReceiveRefusesStreamsReachingOutsideTheReplica(t *testing.T) {
	s := newReceiveScene(t)
	ss := sendstream.New
	str, u64, raw := sendstream.String, sendstream.Uint64, sendstream.Bytes
	base := sendstream.NewUUID()
	// A parent replica whose own content is a link out of it, as a
	// tenant can put in a volume that later becomes the parent.
	parent := filepath.Join(s.fs.Path, "pair", "1")
	if err := s.receive(t, parent, ss().Subvolume("data", base).
		Command(sendstream.Symlink, str(sendstream.AttrPath, "link"), u64(sendstream.AttrIno, 257),
			str(sendstream.AttrPathLink, "../../../victim/secret")).End().Bytes(), btrfs.Confinement{}); err != nil {
		t.Fatalf("receiving a parent with a link in it: %v", err)
	}
	cloneOf := func(uuid [16]byte, from string) *sendstream.Builder {
		return ss().SnapshotOf("data", sendstream.NewUUID(), base, 1).
			Command(sendstream.Mkfile, str(sendstream.AttrPath, "stolen"), u64(sendstream.AttrIno, 300)).
			Command(sendstream.Clone, str(sendstream.AttrPath, "stolen"), u64(sendstream.AttrFileOffset, 0),
				u64(sendstream.AttrCloneLen, 4096), raw(sendstream.AttrCloneUUID, uuid[:]), u64(sendstream.AttrCloneCtransid, 1),
				str(sendstream.AttrClonePath, from), u64(sendstream.AttrCloneOffset, 0)).End()
	}
	big := bytes.Repeat([]byte{'x'}, 48<<10)
	oversize := ss().Subvolume("data", sendstream.NewUUID()).Command(sendstream.Mkfile, str(sendstream.AttrPath, "f"), u64(sendstream.AttrIno, 257))
	for i := range 40 {
		oversize.WriteAt("f", uint64(i*len(big)), big)
	}
	parentPath := filepath.Join(parent, "data")
	for _, tc := range []struct {
		name    string
		stream  []byte
		c       btrfs.Confinement
		refused bool // the check refuses it; otherwise btrfs receive fails inside its chroot
	}{
		{name: "write through an absolute link to a host file", stream: ss().Subvolume("data", sendstream.NewUUID()).
			Command(sendstream.Symlink, str(sendstream.AttrPath, "esc"), u64(sendstream.AttrIno, 257), str(sendstream.AttrPathLink, s.host)).
			WriteAt("esc", 0, []byte("pwned")).End().Bytes()},
		{name: "write through a relative link to another tenant", stream: ss().Subvolume("data", sendstream.NewUUID()).
			Command(sendstream.Symlink, str(sendstream.AttrPath, "esc"), u64(sendstream.AttrIno, 257), str(sendstream.AttrPathLink, "../../../../victim/secret")).
			WriteAt("esc", 0, []byte("pwned")).End().Bytes()},
		{name: "a path climbing out", refused: true, stream: ss().Subvolume("data", sendstream.NewUUID()).
			File("../../victim/secret", 257, []byte("pwned")).End().Bytes()},
		{name: "an absolute path", refused: true, stream: ss().Subvolume("data", sendstream.NewUUID()).
			File(s.host, 257, []byte("pwned")).End().Bytes()},
		{name: "a rename out", refused: true, stream: ss().Subvolume("data", sendstream.NewUUID()).File("f", 257, []byte("x")).
			Command(sendstream.Rename, str(sendstream.AttrPath, "f"), str(sendstream.AttrPathTo, "../../../victim/secret")).End().Bytes()},
		{name: "a hard link to another tenant's file", refused: true, stream: ss().Subvolume("data", sendstream.NewUUID()).
			Command(sendstream.Link, str(sendstream.AttrPath, "l"), str(sendstream.AttrPathLink, "../../../victim/secret")).End().Bytes()},
		{name: "another subvolume name", refused: true, stream: ss().Subvolume("../../victim2", sendstream.NewUUID()).End().Bytes()},
		{name: "a second subvolume", refused: true, stream: ss().Subvolume("data", sendstream.NewUUID()).Subvolume("more", sendstream.NewUUID()).End().Bytes()},
		{name: "a snapshot of another tenant's volume", refused: true, stream: ss().SnapshotOf("data", sendstream.NewUUID(), s.victimUUID, 1).End().Bytes()},
		{name: "a snapshot of another tenant's volume in place of the parent", refused: true, c: btrfs.Confinement{Parent: parentPath},
			stream: ss().SnapshotOf("data", sendstream.NewUUID(), s.victimUUID, 1).End().Bytes()},
		{name: "a clone of another tenant's file", refused: true, c: btrfs.Confinement{Parent: parentPath}, stream: cloneOf(s.victimUUID, "secret").Bytes()},
		{name: "a clone through a link in the parent", refused: true, c: btrfs.Confinement{Parent: parentPath}, stream: cloneOf(base, "link").Bytes()},
		{name: "a clone climbing out of the parent", refused: true, c: btrfs.Confinement{Parent: parentPath}, stream: cloneOf(base, "../../../victim/secret").Bytes()},
		{name: "a subvolume under another's UUID", refused: true, stream: ss().Subvolume("data", s.victimUUID).End().Bytes()},
		{name: "a block device", refused: true, stream: ss().Subvolume("data", sendstream.NewUUID()).
			Command(sendstream.Mknod, str(sendstream.AttrPath, "sda"), u64(sendstream.AttrIno, 257), u64(sendstream.AttrMode, unix.S_IFBLK|0o666), u64(sendstream.AttrRdev, 8<<8)).End().Bytes()},
		{name: "a stream over its bound", refused: true, c: btrfs.Confinement{MaxBytes: 1 << 20}, stream: oversize.End().Bytes()},
		{name: "a stream cut short", refused: true, stream: ss().Subvolume("data", sendstream.NewUUID()).File("f", 257, []byte("x")).Bytes()},
		{name: "a second stream after the end", refused: true, stream: append(ss().Subvolume("data", sendstream.NewUUID()).End().Bytes(),
			ss().Subvolume("data", sendstream.NewUUID()).End().Bytes()...)},
		{name: "version 2", refused: true, stream: append([]byte("btrfs-stream\x00\x02\x00\x00\x00"), ss().Subvolume("data", sendstream.NewUUID()).Bytes()[17:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(s.fs.Path, "pair", "2-"+strings.ReplaceAll(tc.name, " ", "-"))
			err := s.receive(t, dir, tc.stream, tc.c)
			s.untouched(t)
			if tc.refused && !errors.Is(err, btrfs.ErrStreamRefused) {
				t.Errorf("Receive = %v, want a refusal", err)
			}
			if !tc.refused && err == nil {
				t.Errorf("Receive took the stream; its write through the link had to fail inside the chroot")
			}
		})
	}
}

// A pair's sides are on two filesystems, as on two nodes: a stream's
// subvolume UUID may not already be on the receiving one.
func TestReceiveTakesWhatBtrfsSendMakes(t *testing.T) {
	s := newReceiveScene(t)
	ctx := context.Background()
	sender := open(t)
	vol := filepath.Join(sender.Path, "vol")
	if err := sender.CreateSubvolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, reflinked below
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(vol, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("big", data)
	if err := os.MkdirAll(filepath.Join(vol, "dir", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("dir/sub/small", []byte("small"))
	for link, target := range map[string]string{"abs": "/etc/hostname", "rel": "dir/sub/small", "up": "../outside"} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(vol, "big"), filepath.Join(vol, "hard")); err != nil {
		t.Fatal(err)
	}
	snap := func(name string) string {
		p := filepath.Join(sender.Path, name)
		if err := sender.Snapshot(ctx, vol, p, true); err != nil {
			t.Fatal(err)
		}
		return p
	}
	send := func(snapPath, parent string) []byte {
		var out bytes.Buffer
		if err := btrfs.Send(ctx, &out, snapPath, parent); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	s1 := snap("s1")
	if err := s.receive(t, filepath.Join(s.fs.Path, "r", "1"), send(s1, ""), btrfs.Confinement{Name: "s1", MaxBytes: 8 << 20}); err != nil {
		t.Fatalf("receiving a whole stream: %v", err)
	}
	// Clones: from the parent (a reflink of a file it holds) and within
	// the new replica.
	if out, err := exec.Command("cp", "--reflink=always", filepath.Join(vol, "big"), filepath.Join(vol, "copy")).CombinedOutput(); err != nil {
		t.Fatalf("cp --reflink: %v: %s", err, out)
	}
	write("dir/sub/small", []byte("changed"))
	if err := os.Rename(filepath.Join(vol, "dir", "sub"), filepath.Join(vol, "moved")); err != nil {
		t.Fatal(err)
	}
	s2 := snap("s2")
	stream := send(s2, s1)
	if !bytes.Contains(stream, []byte("copy")) {
		t.Fatal("the incremental stream does not name the reflinked copy")
	}
	if err := s.receive(t, filepath.Join(s.fs.Path, "r", "2"), stream,
		btrfs.Confinement{Parent: filepath.Join(s.fs.Path, "r", "1", "s1"), Name: "s2"}); err != nil {
		t.Fatalf("receiving an incremental stream: %v", err)
	}
	got := filepath.Join(s.fs.Path, "r", "2", "s2")
	if out, err := exec.Command("diff", "-r", "--no-dereference", s2, got).CombinedOutput(); err != nil {
		t.Fatalf("the received replica differs from what was sent: %v: %s", err, out)
	}
	s.untouched(t)
}
