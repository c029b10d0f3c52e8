package blockdelta

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
)

// device is a block device in memory.
type device []byte

func (d device) WriteAt(p []byte, off int64) (int, error) { return copy(d[off:], p), nil }

// states makes a device's old state and a new one: random data with a
// hole of zeros, then a few changed places, a zeroed range and a changed
// partial chunk at the end.
func states(t *testing.T) (base, next []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	size := 9<<20 + 12345 // not a whole number of chunks or read blocks
	base = make([]byte, size)
	for i := range base {
		base[i] = byte(r.Uint32())
	}
	clear(base[2<<20 : 3<<20])
	next = bytes.Clone(base)
	copy(next[100:], "changed")                   // first chunk
	copy(next[(4<<20)-3:], "across a read block") // two chunks, two read blocks
	clear(next[6<<20 : 6<<20+3*DefaultChunk])     // zeroed
	copy(next[2<<20+5:], "into the hole")         // a chunk of zeros no more
	next[size-1] ^= 0xff                          // the partial last chunk
	return base, next
}

func TestADeltaTurnsTheBaseIntoTheNewState(t *testing.T) {
	base, next := states(t)
	var stream bytes.Buffer
	sent, err := Diff(&stream, bytes.NewReader(base), bytes.NewReader(next), int64(len(next)), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Changed: 1 + 2 + 1 + 1 data chunks, the last one partial, and 3
	// chunks zeroed.
	if want := int64(4*DefaultChunk + len(next)%DefaultChunk); sent.Data != want || sent.Zeroed != 3*DefaultChunk {
		t.Errorf("sent %d bytes of data and %d of zeros; want %d and %d", sent.Data, sent.Zeroed, want, 3*DefaultChunk)
	}
	if stream.Len() > int(sent.Data)+1024 {
		t.Errorf("the stream is %d bytes for %d bytes of data", stream.Len(), sent.Data)
	}
	copyOfBase := device(bytes.Clone(base))
	got, err := Apply(&stream, copyOfBase, int64(len(copyOfBase)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(copyOfBase, next) {
		t.Error("the base with the delta applied differs from the new state")
	}
	if got != sent {
		t.Errorf("applied %+v; sent %+v", got, sent)
	}
}

// A stream without a base makes any target equal to the new state,
// zeros included.
func TestAWholeStreamOverwritesWhateverTheTargetHeld(t *testing.T) {
	_, next := states(t)
	var stream bytes.Buffer
	sent, err := Diff(&stream, nil, bytes.NewReader(next), int64(len(next)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Data+sent.Zeroed != int64(len(next)) {
		t.Errorf("a whole stream covers %d+%d bytes of %d", sent.Data, sent.Zeroed, len(next))
	}
	target := device(bytes.Repeat([]byte{0xa5}, len(next)+4096)) // larger, and not blank
	if _, err := Apply(&stream, target, int64(len(target))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(target[:len(next)], next) {
		t.Error("the target differs from the new state after a whole stream")
	}
}

// A stream cut anywhere is refused: the receiver must not count its copy
// as a replica.
func TestACutStreamIsRefused(t *testing.T) {
	base, next := states(t)
	var stream bytes.Buffer
	if _, err := Diff(&stream, bytes.NewReader(base), bytes.NewReader(next), int64(len(next)), 0); err != nil {
		t.Fatal(err)
	}
	whole := stream.Bytes()
	for _, cut := range []int{0, 3, 16, 20, 29, 100, len(whole) / 2, len(whole) - 14, len(whole) - 1} {
		_, err := Apply(bytes.NewReader(whole[:cut]), device(bytes.Clone(base)), int64(len(base)))
		if err == nil {
			t.Errorf("a stream cut at %d of %d bytes was applied", cut, len(whole))
		}
	}
}

func TestBadStreamsAreRefusedWithWhy(t *testing.T) {
	_, next := states(t)
	var stream bytes.Buffer
	if _, err := Diff(&stream, nil, bytes.NewReader(next), int64(len(next)), 0); err != nil {
		t.Fatal(err)
	}
	outside := bytes.Clone(stream.Bytes())
	binary.BigEndian.PutUint64(outside[16+1:], uint64(len(next))) // the first record's offset
	miscounted := bytes.Clone(stream.Bytes())
	binary.BigEndian.PutUint64(miscounted[len(miscounted)-12:], 1) // the end record's count
	for name, c := range map[string]struct {
		stream []byte
		size   int64
		want   string
	}{
		"target too small":    {stream.Bytes(), int64(len(next)) - 1, "grow it first"},
		"not a stream":        {[]byte("btrfs-stream...."), int64(len(next)), "not a block delta stream"},
		"outside the device":  {outside, int64(len(next)), "outside the"},
		"records not counted": {miscounted, int64(len(next)), "records;"},
	} {
		_, err := Apply(bytes.NewReader(c.stream), make(device, c.size), c.size)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.want)
		}
	}
}
