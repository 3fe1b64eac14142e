package boot

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strconv"
	"testing"
)

// Fuzz targets for every decoder of a peer's bytes in boot: business cards
// (memberlist node metadata), the roster and recovery messages (memberlist
// user messages),
// frames of the control socket (and of the launcher's agent connections,
// which share ReadFrame) and memberlist node names. CI runs each for a
// few seconds (.ci/run). Each checks that the decoder neither panics nor
// allocates more than a small multiple of its input (msgpack trusts
// declared lengths; checkShape bounds them), and that what it accepts
// encodes back to something it decodes the same way.

// allocated returns how many bytes f allocated on the heap.
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// allocBound is what decoding n bytes of msgpack may allocate: a decoder
// and its buffers, plus the values, each at most as many as the input has
// bytes (a Card is 112 bytes; a map entry of a string and a []byte needs
// at least 2 input bytes).
func allocBound(n int) uint64 { return 64<<10 + 512*uint64(n) }

// norm is c with empty GPU and NIC lists nil: they are omitted when
// empty, so an empty list decodes as none.
func norm(c Card) Card {
	if len(c.GPUs) == 0 {
		c.GPUs = nil
	}
	if len(c.NICs) == 0 {
		c.NICs = nil
	}
	return c
}

// FuzzCard: DecodeCard takes any node metadata; a card it accepts
// encodes to bytes that decode to the same card.
func FuzzCard(f *testing.F) {
	for _, c := range []Card{
		bigCard(),
		{Rank: 3, PID: 42, HostID: "h", Addrs: map[string][]byte{"tcp": []byte("127.0.0.1:1")},
			Placement: Placement{LocalRank: 1, LocalSize: 2, NUMA: -1}},
		{},
	} {
		b, err := c.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Card
		var err error
		if n := allocated(func() { c, err = DecodeCard(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding a %d-byte card allocated %d bytes", len(b), n)
		}
		if err != nil {
			return
		}
		e1, err := c.Encode()
		if err != nil {
			t.Fatalf("card %+v decoded, does not encode: %v", c, err)
		}
		c2, err := DecodeCard(e1)
		if err != nil {
			t.Fatalf("card %+v encoded as %x does not decode: %v", c, e1, err)
		}
		if !reflect.DeepEqual(norm(c), norm(c2)) {
			t.Fatalf("card %+v encodes to %x, which decodes to %+v", c, e1, c2)
		}
	})
}

// FuzzRoster: the roster decoder, as NotifyMsg runs it on every user
// message, takes any bytes.
func FuzzRoster(f *testing.F) {
	for _, r := range []Roster{
		{JobID: "0123456789ab", Cards: []Card{bigCard(), {Rank: 1, HostID: "h", Addrs: map[string][]byte{"sm": []byte("/dev/shm/x")}}}},
		{JobID: "j"},
	} {
		b, err := EncodeRoster(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Roster
		var err error
		if n := allocated(func() { r, err = decodeRoster(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding a %d-byte roster allocated %d bytes", len(b), n)
		}
		if err != nil {
			return
		}
		e1, err := EncodeRoster(r)
		if err != nil {
			t.Fatalf("roster decoded, does not encode: %v", err)
		}
		r2, err := decodeRoster(e1)
		if err != nil {
			t.Fatalf("roster encoded as %x does not decode: %v", e1, err)
		}
		if len(r2.Cards) != len(r.Cards) || r2.JobID != r.JobID {
			t.Fatalf("roster %+v encodes to %x, which decodes to %+v", r, e1, r2)
		}
		for i := range r.Cards {
			if !reflect.DeepEqual(norm(r.Cards[i]), norm(r2.Cards[i])) {
				t.Fatalf("roster %+v encodes to %x, which decodes to %+v", r, e1, r2)
			}
		}
	})
}

// FuzzCtlFrames reads control messages from a stream of any bytes until
// it ends or a frame is refused: no panic, no allocation beyond the
// frame limit plus a multiple of the input, and every message read
// writes back as a frame that reads the same.
func FuzzCtlFrames(f *testing.F) {
	var seed bytes.Buffer
	for _, m := range []CtlMsg{
		{Kind: MsgHello, Secret: bytes.Repeat([]byte{0xa5}, 32)},
		{Kind: MsgFinalized},
		{Kind: MsgAbort, Code: 3, Text: "rank 2 called Abort"},
	} {
		var one bytes.Buffer
		if err := WriteCtl(&one, m); err != nil {
			f.Fatal(err)
		}
		f.Add(one.Bytes())
		seed.Write(one.Bytes())
	}
	f.Add(seed.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f})         // a length past the limit
	f.Add([]byte{0x09, 0, 0, 0, 0x81, 0xa1, 'k'}) // cut short
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			var m CtlMsg
			var err error
			if n := allocated(func() { m, err = ReadCtl(r) }); n > maxCtlMsg+allocBound(len(b)) {
				t.Fatalf("reading a control message from %d bytes allocated %d", len(b), n)
			}
			if err != nil {
				if errors.Is(err, io.EOF) && r.Len() != 0 {
					t.Fatalf("EOF with %d bytes left", r.Len())
				}
				return
			}
			var out bytes.Buffer
			if err := WriteCtl(&out, m); err != nil {
				t.Fatalf("message %+v read, does not write: %v", m, err)
			}
			m2, err := ReadCtl(&out)
			if err != nil {
				t.Fatalf("message %+v written as %x does not read: %v", m, out.Bytes(), err)
			}
			if m2.Kind != m.Kind || !bytes.Equal(m2.Secret, m.Secret) || m2.Code != m.Code || m2.Text != m.Text {
				t.Fatalf("message %+v reads back as %+v", m, m2)
			}
		}
	})
}

// normFT is m with empty lists nil: they are omitted when empty, so an
// empty list decodes as none.
func normFT(m FTMsg) FTMsg {
	if len(m.Members) == 0 {
		m.Members = nil
	}
	if len(m.Words) == 0 {
		m.Words = nil
	}
	if len(m.Failed) == 0 {
		m.Failed = nil
	}
	return m
}

// FuzzFT: DecodeFT, as NotifyMsg runs it on every user message at the
// ranks and the launcher, takes any bytes; a message it accepts encodes
// to one that decodes the same.
func FuzzFT(f *testing.F) {
	for _, m := range []FTMsg{
		{Kind: FTAgree, Key: AgreeKey(3, 1, []int{0, 2}), Rank: 2, Members: []int{0, 2}, Words: []uint64{1, 1 << 63}, Text: "Agree"},
		{Kind: FTFailed, Rank: 1, Text: "rank 1 was killed by signal 9"},
	} {
		b, err := EncodeFT(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Members declared as 2^24 elements in 9 bytes: msgpack allocated
	// 268 MB for it before DecodeFT checked the shape.
	f.Add([]byte{ftTag, 0x81, 0xa1, 'm', 0xdd, 0x01, 0x00, 0x00, 0x00})
	f.Add([]byte{ftTag, 0x82, 0xa1, 'k', FTFailed, 0xa1, 'm', 0x90}) // an empty list, encoded as none
	f.Fuzz(func(t *testing.T, b []byte) {
		var m FTMsg
		var ok bool
		var err error
		if n := allocated(func() { m, ok, err = DecodeFT(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding a %d-byte recovery message allocated %d bytes", len(b), n)
		}
		if !ok || err != nil {
			return
		}
		e1, err := EncodeFT(m)
		if err != nil {
			t.Fatalf("message %+v decoded, does not encode: %v", m, err)
		}
		m2, ok, err := DecodeFT(e1)
		if !ok || err != nil {
			t.Fatalf("message %+v encoded as %x does not decode: %v", m, e1, err)
		}
		if !reflect.DeepEqual(normFT(m), normFT(m2)) {
			t.Fatalf("message %+v encodes to %x, which decodes to %+v", m, e1, m2)
		}
	})
}

// FuzzRankOfNode: a node name from a peer names a rank of the job, or
// none; RankNode's names round-trip.
func FuzzRankOfNode(f *testing.F) {
	for _, s := range []string{RankNode(0), RankNode(7), RankNode(1 << 20), LauncherNode, "rank--1", "rank-+1", "rank-07", "rank-3x", "rank-99999999999999999999"} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, name string, size int) {
		r, ok := RankOfNode(name, size)
		if !ok {
			return
		}
		if r < 0 || r >= size {
			t.Fatalf("RankOfNode(%q, %d) = %d", name, size, r)
		}
		if RankNode(r) != name {
			t.Fatalf("RankOfNode(%q) = %d, whose node is %q", name, r, RankNode(r))
		}
	})
}

// TestRankOfNode: the names fmt.Sscanf("rank-%d") took and mpi's failure
// callback then indexed out of range are refused.
func TestRankOfNode(t *testing.T) {
	for _, c := range []struct {
		name string
		rank int
		ok   bool
	}{
		{"rank-0", 0, true}, {"rank-7", 7, true}, {"rank-8", 0, false}, {"rank--1", 0, false},
		{"rank-+1", 0, false}, {"rank-01", 0, false}, {"rank-3x", 0, false}, {"rank-", 0, false},
		{"gorun", 0, false}, {"rank-" + strconv.Itoa(1<<62), 0, false},
	} {
		r, ok := RankOfNode(c.name, 8)
		if r != c.rank || ok != c.ok {
			t.Errorf("RankOfNode(%q, 8) = %d, %v; want %d, %v", c.name, r, ok, c.rank, c.ok)
		}
	}
}
