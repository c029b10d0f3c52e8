package btrfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A send stream (version 1) is a header, then commands: each a 10-byte
// header (payload length, command, CRC-32C) and a payload of
// type-length-value attributes. These are the numbers the kernel and
// btrfs-progs give them (send.h).
const (
	streamMagic     = "btrfs-stream\x00"
	streamHeaderLen = len(streamMagic) + 4
	cmdHeaderLen    = 10
	// maxCommandLen is version 1's send buffer: no command is longer.
	maxCommandLen = 64 << 10
)

// Send stream commands.
const (
	cmdSubvol       = 1
	cmdSnapshot     = 2
	cmdMknod        = 5
	cmdLink         = 10
	cmdClone        = 16
	cmdEnd          = 21
	cmdUpdateExtent = 22
)

// Send stream attributes.
const (
	attrUUID      = 1
	attrMode      = 5
	attrPath      = 15
	attrPathTo    = 16
	attrPathLink  = 17
	attrCloneUUID = 20
	attrClonePath = 22
)

// ErrStreamRefused is what every refusal of a stream wraps.
var ErrStreamRefused = errors.New("send stream refused")

// streamCheck passes a send stream through one whole command at a time,
// and only once the command is checked: btrfs receive never sees a
// command that would reach outside the subvolume being received. It
// does not trust the CRC or the length to stop anything: each command
// is read whole, bounded, and judged on what btrfs receive would do
// with it.
type streamCheck struct {
	r     io.Reader
	rules streamRules

	read     int64
	commands int
	started  bool // the stream's one subvolume command was seen
	ended    bool
	own      [16]byte // the UUID the stream gives its subvolume
	pending  []byte
	refusal  error
	// buf holds one command at a time, reused: pending is read out of
	// it before the next command is read in.
	buf []byte
}

// streamRules are what a stream may do, beside keeping its paths inside
// its subvolume.
type streamRules struct {
	// name is the one subvolume the stream may make.
	name string
	// parent is the identity an incremental stream must build on (the
	// local parent's received UUID, or its UUID); zero for a whole
	// stream.
	parent [16]byte
	// maxBytes bounds the stream; 0 is no bound.
	maxBytes int64
	// inUse says whether a UUID already names a subvolume on the
	// filesystem, sent or received.
	inUse func(uuid [16]byte) (bool, error)
	// cloneSource checks a path a clone reads from the parent.
	cloneSource func(path string) error
}

// WriteTo passes the checked stream to w a whole command at a time,
// with no copy between: os/exec feeds btrfs receive's input with it.
func (s *streamCheck) WriteTo(w io.Writer) (int64, error) {
	var written int64
	for {
		if err := s.fill(); errors.Is(err, io.EOF) {
			return written, nil
		} else if err != nil {
			return written, err
		}
		n, err := w.Write(s.pending)
		written += int64(n)
		s.pending = s.pending[n:]
		if err != nil {
			return written, err
		}
	}
}

func (s *streamCheck) Read(p []byte) (int, error) {
	if err := s.fill(); err != nil {
		return 0, err
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// fill reads and checks commands until one is pending, and keeps a
// refusal: every later read gets it again.
func (s *streamCheck) fill() error {
	for len(s.pending) == 0 {
		if s.refusal != nil {
			return s.refusal
		}
		if err := s.next(); err != nil {
			if errors.Is(err, ErrStreamRefused) {
				s.refusal = err
			}
			return err
		}
	}
	return nil
}

func (s *streamCheck) refuse(format string, args ...any) error {
	return fmt.Errorf("%w: command %d: %s", ErrStreamRefused, s.commands, fmt.Sprintf(format, args...))
}

// next reads, checks and queues the next piece: the header or a command.
func (s *streamCheck) next() error {
	if s.read == 0 {
		return s.header()
	}
	if s.buf == nil {
		s.buf = make([]byte, cmdHeaderLen+maxCommandLen)
	}
	head := s.buf[:cmdHeaderLen]
	if _, err := io.ReadFull(s.r, head); err != nil {
		if errors.Is(err, io.EOF) && s.ended {
			return io.EOF
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return s.refuse("the stream ends before its end command")
		}
		return err
	}
	s.commands++
	if s.ended {
		return s.refuse("more follows the end command; a replica is one subvolume")
	}
	size := binary.LittleEndian.Uint32(head[0:4])
	cmd := binary.LittleEndian.Uint16(head[4:6])
	if size > maxCommandLen {
		return s.refuse("%d bytes long, over version 1's %d", size, maxCommandLen)
	}
	if s.rules.maxBytes > 0 && s.read+int64(cmdHeaderLen)+int64(size) > s.rules.maxBytes {
		return s.refuse("the stream is over %d bytes, its bound (the tenant's quota, or twice the volume's size)", s.rules.maxBytes)
	}
	whole := s.buf[:cmdHeaderLen+int(size)]
	if _, err := io.ReadFull(s.r, whole[cmdHeaderLen:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return s.refuse("the stream is cut inside a command")
		}
		return err
	}
	attrs, err := parseAttrs(whole[cmdHeaderLen:])
	if err != nil {
		return s.refuse("%v", err)
	}
	if err := s.check(cmd, attrs); err != nil {
		return err
	}
	s.read += int64(len(whole))
	s.pending = whole
	return nil
}

func (s *streamCheck) header() error {
	head := make([]byte, streamHeaderLen)
	if _, err := io.ReadFull(s.r, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return s.refuse("the stream ends inside its header")
		}
		return err
	}
	if string(head[:len(streamMagic)]) != streamMagic {
		return s.refuse("not a btrfs send stream")
	}
	if v := binary.LittleEndian.Uint32(head[len(streamMagic):]); v != 1 {
		return s.refuse("stream version %d; agents send version 1", v)
	}
	s.read = int64(len(head))
	s.pending = head
	return nil
}

// parseAttrs splits a command's payload into its attributes. A repeated
// attribute is refused: btrfs receive would act on the last, this check
// might judge the first.
func parseAttrs(payload []byte) (map[uint16][]byte, error) {
	attrs := map[uint16][]byte{}
	for len(payload) > 0 {
		if len(payload) < 4 {
			return nil, fmt.Errorf("an attribute cut short")
		}
		typ, n := binary.LittleEndian.Uint16(payload[0:2]), int(binary.LittleEndian.Uint16(payload[2:4]))
		if len(payload) < 4+n {
			return nil, fmt.Errorf("attribute %d is longer than its command", typ)
		}
		if _, seen := attrs[typ]; seen {
			return nil, fmt.Errorf("attribute %d is given twice", typ)
		}
		attrs[typ] = payload[4 : 4+n]
		payload = payload[4+n:]
	}
	return attrs, nil
}

// check judges one command.
func (s *streamCheck) check(cmd uint16, attrs map[uint16][]byte) error {
	if cmd == 0 || cmd > cmdUpdateExtent {
		return s.refuse("command type %d is not one of version 1's", cmd)
	}
	if !s.started {
		return s.begin(cmd, attrs)
	}
	if cmd == cmdSubvol || cmd == cmdSnapshot {
		return s.refuse("a second subvolume; a replica is one")
	}
	for _, a := range pathAttrs(cmd) {
		if p, ok := attrs[a]; ok {
			if err := insideSubvolume(string(p)); err != nil {
				return s.refuse("%v", err)
			}
		}
	}
	switch cmd {
	case cmdMknod:
		if mode := leUint(attrs[attrMode]); mode&unix.S_IFMT == unix.S_IFBLK || mode&unix.S_IFMT == unix.S_IFCHR {
			return s.refuse("device node %q: a volume may not carry devices", attrs[attrPath])
		}
	case cmdClone:
		return s.checkClone(attrs)
	case cmdEnd:
		s.ended = true
	}
	return nil
}

// begin judges the first command: the one subvolume, named as agreed, a
// whole one or a snapshot of the agreed parent, under a UUID of its own.
func (s *streamCheck) begin(cmd uint16, attrs map[uint16][]byte) error {
	whole := s.rules.parent == [16]byte{}
	switch {
	case whole && cmd != cmdSubvol:
		return s.refuse("a whole replica must begin with a new subvolume, not command %d", cmd)
	case !whole && cmd != cmdSnapshot:
		return s.refuse("a replica from a parent must begin with a snapshot of it, not command %d", cmd)
	}
	if name := string(attrs[attrPath]); name != s.rules.name {
		return s.refuse("the subvolume is named %q, not %q", name, s.rules.name)
	}
	if len(attrs[attrUUID]) != 16 {
		return s.refuse("the subvolume has no UUID")
	}
	copy(s.own[:], attrs[attrUUID])
	if s.own == [16]byte{} {
		return s.refuse("the subvolume's UUID is zero")
	}
	if !whole && string(attrs[attrCloneUUID]) != string(s.rules.parent[:]) {
		return s.refuse("the snapshot builds on subvolume %s, not the replica's parent %s", formatUUID(attrs[attrCloneUUID]), formatUUID(s.rules.parent[:]))
	}
	used, err := s.rules.inUse(s.own)
	if err != nil {
		return err
	}
	if used {
		return s.refuse("the subvolume's UUID %s already names a subvolume on this filesystem", formatUUID(s.own[:]))
	}
	s.started = true
	return nil
}

// checkClone lets a clone read only from the subvolume being received
// (btrfs receive resolves it inside its chroot) or from the replica's
// parent, through a path that stays in the parent and crosses no
// symbolic link: btrfs receive opens a parent's path from the
// filesystem's mount, outside the chroot.
func (s *streamCheck) checkClone(attrs map[uint16][]byte) error {
	from := attrs[attrCloneUUID]
	switch {
	case string(from) == string(s.own[:]):
		return nil
	case s.rules.parent != [16]byte{} && string(from) == string(s.rules.parent[:]):
		if err := s.rules.cloneSource(string(attrs[attrClonePath])); err != nil {
			return s.refuse("a clone from the parent's %q: %v", attrs[attrClonePath], err)
		}
		return nil
	}
	return s.refuse("a clone from subvolume %s, which is neither this replica nor its parent", formatUUID(from))
}

// pathAttrs are the attributes of a command that name a path in the
// subvolume. A symbolic link's target is its content, not a path the
// stream acts on, so only a hard link's is one.
func pathAttrs(cmd uint16) []uint16 {
	if cmd == cmdLink {
		return []uint16{attrPath, attrPathLink}
	}
	return []uint16{attrPath, attrPathTo, attrClonePath}
}

// insideSubvolume refuses a path that is absolute, climbs with "..", or
// is not in the clean form the kernel sends. The empty path is the
// subvolume's root, whose owner, mode and times a stream sets.
func insideSubvolume(p string) error {
	switch {
	case p == "":
		return nil
	case p == "." || strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q names nothing in the subvolume", p)
	case filepath.IsAbs(p):
		return fmt.Errorf("path %q is absolute", p)
	case p == ".." || strings.HasPrefix(p, "../") || filepath.Clean(p) != p:
		return fmt.Errorf("path %q leaves the subvolume or is not clean", p)
	}
	return nil
}

func leUint(b []byte) uint64 {
	var full [8]byte
	copy(full[:], b)
	return binary.LittleEndian.Uint64(full[:])
}

func formatUUID(b []byte) string {
	if len(b) != 16 {
		return fmt.Sprintf("(%d bytes)", len(b))
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
