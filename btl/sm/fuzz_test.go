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

// refRing is the reference decoder of a ring's fragments (each the bytes
// of a slot after its seq word): the frames they hold whole, and whether
// the consumer must fail the producer on the way.
func refRing(frags [][]byte, limit int) (hdrs []btl.Header, frames [][]byte, fail bool) {
	for i := 0; i < len(frags); {
		meta := binary.LittleEndian.Uint64(frags[i])
		total, hl := meta&metaLenMask, int(meta>>metaHdrShift)
		if total > maxFrame || hl > btl.HeaderSize || total > uint64(limit) {
			return hdrs, frames, true
		}
		var h btl.Header
		copy(h[:hl], frags[i][offSlotHdr-8:])
		data := append([]byte(nil), frags[i][offSlotHdr-8+hl:]...)
		i++
		for uint64(len(data)) < total && i < len(frags) {
			data = append(data, frags[i][offSlotCont-8:]...)
			i++
		}
		if uint64(len(data)) < total {
			return hdrs, frames, false // the frame is not complete yet
		}
		hdrs = append(hdrs, h)
		frames = append(frames, data[:total])
	}
	return hdrs, frames, false
}

// FuzzRing plays a producer that writes any bytes as fragments into a
// ring of real shared memory (each slot's bytes after its seq word, then
// the seq word, as outRing.push publishes them), polling the consumer
// every batch fragments and whenever the ring is full. The consumer must
// deliver exactly the frames the fragments hold whole, with their headers,
// and fail the producer (never panic) on a length or header size out of
// range or a frame the handler refuses.
func FuzzRing(f *testing.F) {
	stride := slotStride(fuzzFrag)
	slot := func(total uint64, hl int, hdr, data []byte) []byte {
		s := make([]byte, stride-8)
		binary.LittleEndian.PutUint64(s, total|uint64(hl)<<metaHdrShift)
		copy(s[offSlotHdr-8:], hdr[:min(hl, len(hdr))])
		copy(s[offSlotHdr-8+hl:], data)
		return s
	}
	cont := func(data []byte) []byte {
		s := make([]byte, stride-8)
		copy(s[offSlotCont-8:], data)
		return s
	}
	hdr := bytes.Repeat([]byte{0xa7}, btl.HeaderSize)
	one := slot(5, 32, hdr, []byte("hello"))
	long := append(slot(200, 48, hdr, bytes.Repeat([]byte{1}, 200)), cont(bytes.Repeat([]byte{2}, 200))...)
	long = append(long, cont(bytes.Repeat([]byte{3}, 200))...)
	f.Add(one, uint8(1))
	f.Add(append(append(one, long...), slot(0, 0, hdr, nil)...), uint8(2))
	f.Add(slot(1<<43, 8, hdr, nil), uint8(1))
	f.Add(slot(3, 60, hdr, nil), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, batch uint8) {
		mem, err := unix.Mmap(-1, 0, ringBytes(fuzzSlots, fuzzFrag), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		var frags [][]byte
		for len(b) > 0 {
			s := make([]byte, stride-8)
			b = b[copy(s, b):]
			frags = append(frags, s)
		}
		const limit = 4 * fuzzFrag
		h := &checker{limit: limit}
		m := &module{env: btl.Env{Rank: 0, Size: 2, Handler: h}}
		p := &peer{rank: 1, pid: os.Getpid(), pidfd: -1}
		r := newInRing(p, mem, fuzzSlots, fuzzFrag)
		p.in = r
		if batch == 0 {
			batch = 1
		}
		for t0, s := range frags {
			tk := uint64(t0)
			for tk-r.head >= fuzzSlots && p.err == nil {
				if r.poll(m); tk-r.head >= fuzzSlots && p.err == nil {
					t.Fatalf("ring full at ticket %d and the consumer took nothing", tk)
				}
			}
			if p.err != nil {
				break
			}
			dst := r.slot(tk)
			copy(dst[8:], s)
			atomic.StoreUint64(u64(dst, offSlotSeq), tk+1)
			if (t0+1)%int(batch) == 0 {
				r.poll(m)
			}
		}
		for p.err == nil && r.ready() {
			r.poll(m)
		}
		wantHdrs, wantFrames, wantFail := refRing(frags, limit)
		if (h.failed != nil) != wantFail {
			t.Fatalf("producer failed: %v; want failed: %v", h.failed, wantFail)
		}
		if len(h.frames) != len(wantFrames) {
			t.Fatalf("%d frames delivered, want %d", len(h.frames), len(wantFrames))
		}
		for i := range wantFrames {
			if h.hdrs[i] != wantHdrs[i] || !bytes.Equal(h.frames[i], wantFrames[i]) {
				t.Fatalf("frame %d: header %x, %d bytes; want %x, %d bytes", i, h.hdrs[i][:8], len(h.frames[i]), wantHdrs[i][:8], len(wantFrames[i]))
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
