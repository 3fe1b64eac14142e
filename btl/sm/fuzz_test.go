package sm

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

// Fuzz targets for every decoder of a peer's bytes in btl/sm: the
// fragments a producer writes into a ring (inRing.poll) and the header of
// a peer's segment (attach). The RMA region key is btl's (FuzzRegion).
// CI runs each for a few seconds (.ci/run).

// fuzzSlots and fuzzFrag: a small ring, so that a few hundred bytes of
// input span laps and multi-fragment frames.
const fuzzSlots, fuzzFrag = 4, 64

// checker keeps each frame and refuses (nil) a payload above limit.
type checker struct {
	limit  int
	hdrs   []btl.Header
	frames [][]byte
	failed error
}

func (c *checker) Begin(src int, h *btl.Header, n int) []byte {
	if n > c.limit {
		return nil
	}
	return make([]byte, n)
}

func (c *checker) End(src int, h *btl.Header, d []byte) {
	c.hdrs = append(c.hdrs, *h)
	c.frames = append(c.frames, d)
}

func (c *checker) PeerFailed(src int, err error) {
	if c.failed == nil {
		c.failed = err
	}
}

// refRecord is the reference decoder of one record: given its meta word,
// the ring's geometry (cap, the largest record rec, the record's offset)
// and the frame in progress (inFrame, rem bytes of it left), the body
// bytes it has after its meta word, and whether the consumer must fail
// the producer on it instead (limit: the largest frame the handler takes).
func refRecord(meta uint64, capacity, rec, off int, inFrame bool, rem, limit int) (body int, fail bool) {
	room := min(rec, capacity-off) // the longest record that may start at off
	switch kind := meta >> metaKindShift; {
	case kind == recSkip:
		return capacity - off - offRecBody, false
	case kind == recFirst && !inFrame:
		total, hl := meta&metaLenMask, int(meta>>metaHdrShift&0xff)
		if total > maxFrame || hl > btl.HeaderSize || total > uint64(limit) {
			return 0, true
		}
		body = hl + min(int(total), rec-offRecBody-hl)
		return body, recLen(body) > room
	case kind == recCont && inFrame:
		n := int(meta & metaLenMask)
		return n, n == 0 || n > rem || recLen(n) > room
	}
	return 0, true
}

// FuzzRing plays a producer that writes any bytes as records into a ring
// of real shared memory: each record's meta word and body from the input
// (the body as long as the reference decoder says the meta word asks
// for), then the terminator and the seq word, as outRing.publish does,
// or, for a word of kind recShort or recPad, a short record or a pad (its
// position filled in, as putShort and pad write them),
// polling the consumer every batch records and whenever the ring is full.
// The consumer must deliver exactly the frames the records hold whole,
// with their headers, and fail the producer (never panic) on a length,
// header size or record kind out of place, or a frame the handler
// refuses.
func FuzzRing(f *testing.F) {
	rec := slotStride(fuzzFrag)
	le := binary.LittleEndian
	first := func(total uint64, hl int, hdr, data []byte) []byte {
		b := le.AppendUint64(nil, recFirst<<metaKindShift|uint64(hl)<<metaHdrShift|total)
		b = append(b, hdr[:min(hl, len(hdr))]...)
		return append(b, data...)
	}
	cont := func(data []byte) []byte {
		return append(le.AppendUint64(nil, recCont<<metaKindShift|uint64(len(data))), data...)
	}
	hdr := bytes.Repeat([]byte{0xa7}, btl.HeaderSize)
	one := first(5, 32, hdr, []byte("hello"))
	long := append(first(200, 48, hdr, bytes.Repeat([]byte{1}, rec-offRecBody-48)), cont(bytes.Repeat([]byte{2}, 100))...)
	long = append(long, cont(bytes.Repeat([]byte{3}, 200-100-(rec-offRecBody-48)))...)
	skip := le.AppendUint64(nil, recSkip<<metaKindShift)
	// A short record's body is always shortBody bytes of the input.
	short := func(hl, n int) []byte {
		return append(le.AppendUint64(nil, shortWord(0, hl, n)), bytes.Repeat([]byte{0x5c}, shortBody)...)
	}
	pad := le.AppendUint64(nil, recPad<<metaKindShift)
	f.Add(one, uint8(1))
	f.Add(append(append(append(one, long...), skip...), first(0, 0, hdr, nil)...), uint8(2))
	f.Add(first(1<<43, 8, hdr, nil), uint8(1))
	f.Add(first(3, 60, hdr, nil), uint8(1))
	f.Add(cont([]byte("x")), uint8(1))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// Short records and pads among full ones, full records and a skip on
	// half lines (after an odd number of short records, without a pad)
	// and on lines (with one).
	f.Add(cat(short(13, 8), short(0, 0), one, short(20, 4), long, skip, short(9, 15), one), uint8(3))
	f.Add(cat(short(13, 8), pad, one, long, short(1, 1), short(2, 2), pad, skip, one), uint8(2))
	f.Add(cat(one, short(13, 12), long), uint8(1)) // 25 bytes: too long
	// A short record inside a frame half received.
	f.Add(cat(first(200, 48, hdr, bytes.Repeat([]byte{1}, rec-offRecBody-48)), short(1, 1)), uint8(1))
	// A pad between a frame's records (no producer writes one there; the
	// consumer passes over it).
	f.Add(cat(first(200, 48, hdr, bytes.Repeat([]byte{1}, rec-offRecBody-48)), pad, cont(bytes.Repeat([]byte{2}, 100)), cont(bytes.Repeat([]byte{3}, 200-100-(rec-offRecBody-48)))), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, batch uint8) {
		mem, err := unix.Mmap(-1, 0, ringBytes(fuzzSlots, fuzzFrag), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		const limit = 4 * fuzzFrag
		h := &checker{limit: limit}
		m := &module{env: btl.Env{Rank: 0, Size: 2, Handler: h}}
		p := &peer{rank: 1, pid: os.Getpid(), pidfd: -1}
		r := newInRing(p, mem, fuzzSlots, fuzzFrag)
		p.in = r
		if batch == 0 {
			batch = 1
		}
		var (
			tail      uint64 // the producer's stream position
			wantHdrs  []btl.Header
			wantFrms  [][]byte
			cur       []byte // the frame in progress, nil if none
			total     int
			wantFail  bool
			published int
		)
		// Wait for room for a record of l bytes and the terminator's line.
		room := func(l int) {
			for tail+uint64(l+lineSize)-atomic.LoadUint64(r.headp) > uint64(r.cap) {
				if r.poll(m); tail+uint64(l+lineSize)-atomic.LoadUint64(r.headp) > uint64(r.cap) {
					t.Fatalf("ring full at %d and the consumer took nothing (err %v)", tail, p.err)
				}
			}
		}
		for len(b) >= 8 && !wantFail {
			meta := le.Uint64(b)
			b = b[8:]
			off := int(tail % uint64(r.cap))
			if k := meta >> metaKindShift; k == recShort || k == recPad {
				// A short record (the word's header and payload lengths
				// from the input) or a pad, at its position as a producer
				// writes it.
				hl, n := int(meta>>metaHdrShift&0xff), int(meta>>shortSeqBits&0xff)
				room(halfLine)
				body := r.data[off+8 : off+halfLine]
				if k == recPad {
					*u64(r.data, (off+halfLine)%r.cap) = 0
				} else if b = b[copy(body, b):]; cur != nil || hl > btl.HeaderSize || hl+n > shortBody {
					wantFail = true
				} else {
					*u64(r.data, (off+halfLine)%r.cap) = 0
					var fh btl.Header
					copy(fh[:hl], body)
					wantHdrs = append(wantHdrs, fh)
					wantFrms = append(wantFrms, append([]byte{}, body[hl:hl+n]...))
				}
				atomic.StoreUint64(u64(r.data, off), meta&^(1<<shortSeqBits-1)|shortSeq(tail))
				tail += halfLine
				if published++; published%int(batch) == 0 {
					r.poll(m)
				}
				continue
			}
			n, fail := refRecord(meta, r.cap, r.rec, off, cur != nil, total-len(cur), limit)
			l := min(recLen(n), r.cap-off)
			if l+lineSize > r.cap {
				continue // a skip of the whole ring: no producer can write it
			}
			room(l)
			body := r.data[off+offRecBody : off+l]
			k := copy(body[:min(n, len(body))], b)
			b = b[k:]
			le.PutUint64(r.data[off+offRecMeta:], meta)
			if fail {
				wantFail = true
			} else {
				next := (off + l) % r.cap
				*u64(r.data, next) = 0
				switch meta >> metaKindShift {
				case recFirst:
					hl := int(meta >> metaHdrShift & 0xff)
					var fh btl.Header
					copy(fh[:hl], body)
					wantHdrs = append(wantHdrs, fh)
					total = int(meta & metaLenMask)
					cur = append([]byte{}, body[hl:n]...)
				case recCont:
					cur = append(cur, body[:n]...)
				}
				if cur != nil && len(cur) == total {
					wantFrms = append(wantFrms, cur)
					cur = nil
				}
			}
			atomic.StoreUint64(u64(r.data, off), tail+1)
			tail += uint64(l)
			if published++; published%int(batch) == 0 {
				r.poll(m)
			}
		}
		for p.err == nil && r.ready() {
			r.poll(m)
		}
		if cur != nil {
			wantHdrs = wantHdrs[:len(wantHdrs)-1] // not delivered: not whole
		}
		if (h.failed != nil) != wantFail {
			t.Fatalf("producer failed: %v; want failed: %v", h.failed, wantFail)
		}
		if len(h.frames) != len(wantFrms) {
			t.Fatalf("%d frames delivered, want %d", len(h.frames), len(wantFrms))
		}
		for i := range wantFrms {
			if h.hdrs[i] != wantHdrs[i] || !bytes.Equal(h.frames[i], wantFrms[i]) {
				t.Fatalf("frame %d: header %x, %d bytes; want %x, %d bytes", i, h.hdrs[i][:8], len(h.frames[i]), wantHdrs[i][:8], len(wantFrms[i]))
			}
		}
	})
}

// FuzzAttach writes any bytes as a peer's segment (a real file of this
// user, mode 0600, in a temporary directory) and attaches it: attach must
// refuse it or return a geometry that fits the file and the job, never
// panic, and map no more than the control area that the file holds.
func FuzzAttach(f *testing.F) {
	const size = 4
	dir := f.TempDir()
	good := filepath.Join(dir, "good")
	s, err := create(good, size, 2, lineSize)
	if err != nil {
		f.Fatal(err)
	}
	hdr := make([]byte, lineSize)
	copy(hdr, s.ctl[:lineSize])
	s.close()
	f.Add(hdr, int64(s.ringBase)+size*int64(s.ringSize))
	f.Add(hdr, int64(lineSize))
	bad := append([]byte(nil), hdr...)
	binary.LittleEndian.PutUint32(bad[offSlots:], 1<<31)
	f.Add(bad, int64(1<<20))
	// A geometry whose ring size overflows int: 2^31 slots of 2^32-64
	// bytes.
	wrap := append([]byte(nil), hdr...)
	binary.LittleEndian.PutUint32(wrap[offSlots:], 1<<31)
	binary.LittleEndian.PutUint32(wrap[offFrag:], 1<<32-lineSize)
	binary.LittleEndian.PutUint64(wrap[offRingSize:], uint64(ringBytes(1<<31, 1<<32-lineSize)))
	f.Add(wrap, int64(1<<20))
	f.Fuzz(func(t *testing.T, h []byte, fileSize int64) {
		path := filepath.Join(dir, "seg")
		os.Remove(path)
		if err := os.WriteFile(path, h, 0o600); err != nil {
			t.Fatal(err)
		}
		if fileSize < int64(len(h)) || fileSize > 1<<40 {
			fileSize = int64(len(h))
		}
		if err := os.Truncate(path, fileSize); err != nil {
			t.Fatal(err)
		}
		seg, err := attach(path, size)
		if err != nil {
			return
		}
		defer seg.close()
		// The rings' bytes, without the overflow a peer's geometry
		// could cause in int arithmetic.
		hi, lo := bits.Mul64(uint64(seg.slots), uint64(slotStride(seg.frag)))
		if hi != 0 || lo > uint64(seg.ringSize) || seg.ringSize <= 0 {
			t.Fatalf("attached a segment of %d slots of %d bytes in rings of %d bytes", seg.slots, seg.frag, seg.ringSize)
		}
		if seg.size != size || seg.slots < 2 || seg.frag < lineSize ||
			seg.ringBase != int64(ctlBytes(size)) || seg.ringSize != ringBytes(seg.slots, seg.frag) ||
			seg.ringBase+size*int64(seg.ringSize) > fileSize || len(seg.ctl) != int(seg.ringBase) {
			t.Fatalf("attached a segment of %d ranks, %d slots of %d bytes, rings at %d of %d bytes each, in a file of %d bytes",
				seg.size, seg.slots, seg.frag, seg.ringBase, seg.ringSize, fileSize)
		}
	})
}
