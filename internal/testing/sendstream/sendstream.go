// Package sendstream writes btrfs send streams (version 1) command by
// command, for tests that play a hostile peer: streams btrfs send would
// never make, with paths, clones and subvolumes of the attacker's choice.
package sendstream

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"
)

// Commands and attributes, numbered as in the kernel's send.h.
const (
	Subvol   = 1
	Snapshot = 2
	Mkfile   = 3
	Mkdir    = 4
	Mknod    = 5
	Symlink  = 8
	Rename   = 9
	Link     = 10
	Write    = 15
	Clone    = 16
	Truncate = 17
	End      = 21

	AttrUUID          = 1
	AttrCtransid      = 2
	AttrIno           = 3
	AttrSize          = 4
	AttrMode          = 5
	AttrRdev          = 8
	AttrPath          = 15
	AttrPathTo        = 16
	AttrPathLink      = 17
	AttrFileOffset    = 18
	AttrData          = 19
	AttrCloneUUID     = 20
	AttrCloneCtransid = 21
	AttrClonePath     = 22
	AttrCloneOffset   = 23
	AttrCloneLen      = 24
)

// Attr is one attribute of a command.
type Attr struct {
	Type  uint16
	Value []byte
}

// String is a path or name attribute.
func String(t uint16, s string) Attr { return Attr{t, []byte(s)} }

// Uint64 is a number attribute.
func Uint64(t uint16, v uint64) Attr {
	return Attr{t, binary.LittleEndian.AppendUint64(nil, v)}
}

// Bytes is a raw attribute: a UUID or file data.
func Bytes(t uint16, b []byte) Attr { return Attr{t, b} }

// Builder accumulates a stream.
type Builder struct{ buf bytes.Buffer }

// New starts a stream with its header.
func New() *Builder {
	b := &Builder{}
	b.buf.WriteString("btrfs-stream\x00")
	b.buf.Write(binary.LittleEndian.AppendUint32(nil, 1))
	return b
}

// Command appends one command with its CRC-32C, as the kernel computes
// it: over the header, its checksum zero, and the payload, seeded with
// zero and not inverted.
func (b *Builder) Command(cmd uint16, attrs ...Attr) *Builder {
	var payload bytes.Buffer
	for _, a := range attrs {
		payload.Write(binary.LittleEndian.AppendUint16(nil, a.Type))
		payload.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(a.Value))))
		payload.Write(a.Value)
	}
	head := make([]byte, 10)
	binary.LittleEndian.PutUint32(head[0:4], uint32(payload.Len()))
	binary.LittleEndian.PutUint16(head[4:6], cmd)
	whole := append(head, payload.Bytes()...)
	sum := ^crc32.Update(^uint32(0), crc32.MakeTable(crc32.Castagnoli), whole)
	binary.LittleEndian.PutUint32(whole[6:10], sum)
	b.buf.Write(whole)
	return b
}

// Subvolume begins a whole stream of a new subvolume named name.
func (b *Builder) Subvolume(name string, uuid [16]byte) *Builder {
	return b.Command(Subvol, String(AttrPath, name), Bytes(AttrUUID, uuid[:]), Uint64(AttrCtransid, 1))
}

// SnapshotOf begins an incremental stream of a snapshot of the
// subvolume parent (by the UUID the stream names it by) named name.
func (b *Builder) SnapshotOf(name string, uuid, parent [16]byte, parentCtransid uint64) *Builder {
	return b.Command(Snapshot, String(AttrPath, name), Bytes(AttrUUID, uuid[:]), Uint64(AttrCtransid, 1),
		Bytes(AttrCloneUUID, parent[:]), Uint64(AttrCloneCtransid, parentCtransid))
}

// File makes a regular file holding data.
func (b *Builder) File(path string, ino uint64, data []byte) *Builder {
	b.Command(Mkfile, String(AttrPath, path), Uint64(AttrIno, ino))
	return b.WriteAt(path, 0, data)
}

// WriteAt writes data into path at offset.
func (b *Builder) WriteAt(path string, offset uint64, data []byte) *Builder {
	return b.Command(Write, String(AttrPath, path), Uint64(AttrFileOffset, offset), Bytes(AttrData, data))
}

// End ends the stream.
func (b *Builder) End() *Builder { return b.Command(End) }

// Bytes returns the stream so far.
func (b *Builder) Bytes() []byte { return bytes.Clone(b.buf.Bytes()) }

// NewUUID is a random UUID for a stream's subvolume.
func NewUUID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return u
}
