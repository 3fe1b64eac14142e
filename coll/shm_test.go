package coll

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"unsafe"
)

// TestShmSetupSurvivesOneRankFailing: the first blocking call on a
// communicator fails at rank 1 only (as a bad root there does: package mpi
// calls Prepare, then Abort, and never the algorithm), and rank 1 aborts
// before it even prepares, so that its notice reaches the others before or
// during their set-up and revokes the call's tags. The set-up still ends
// alike everywhere (every rank has the segment), the others' call ends
// with success or rank 1's *AbortedError, and the next calls (a barrier, a
// broadcast from rank 1, an allreduce, all in shared memory) work. Before
// the set-up had a channel of its own and ran at Prepare, rank 1 never ran
// it and the others' failed, and rank 1 ran it at the next call against
// the others' point-to-point barrier.
func TestShmSetupSurvivesOneRankFailing(t *testing.T) {
	if !shmOn() {
		t.Skip("GORUN_COLL_SHM=0")
	}
	const np, ctx = 3, 11
	SetJob(fmt.Sprintf("colltest%d", os.Getpid()))
	engs := openEngines(t, np)
	world := []int{0, 1, 2}
	comms := make([]Comm, np)
	for r := range np {
		comms[r] = NewComm(engs[r], ctx, world, r, nil)
		t.Cleanup(comms[r].sh.shm.close)
	}
	cause := errors.New("root 7 is not in the communicator")
	ranks(t, engs, func(r int) {
		v := comms[r].Begin()
		if r == 1 {
			v.Abort(5, cause)
			if err := v.Prepare(); err != nil {
				t.Errorf("rank 1: prepare: %v", err)
			}
			return
		}
		if err := v.Prepare(); err != nil {
			t.Errorf("rank %d: prepare: %v", r, err)
			return
		}
		err := Bcast(&v, &Args{Recv: make([]byte, 8), Root: 0})
		var ae *AbortedError
		if err != nil && (!errors.As(err, &ae) || ae.Rank != 1) {
			t.Errorf("rank %d: bcast that rank 1 aborted: %v, want nil or rank 1's *AbortedError", r, err)
		}
	})
	for r := range np {
		if comms[r].sh.shm.seg.Load() == nil {
			t.Fatalf("rank %d has no segment: the set-up did not end alike everywhere", r)
		}
	}
	ranks(t, engs, func(r int) {
		v := comms[r].Begin()
		if err := v.Prepare(); err != nil {
			t.Errorf("rank %d: prepare: %v", r, err)
		}
		if err := Barrier(&v, nil); err != nil {
			t.Errorf("rank %d: barrier after the failed call: %v", r, err)
		}
		want := []byte("from rank 1")
		buf := make([]byte, len(want))
		if r == 1 {
			copy(buf, want)
		}
		v = comms[r].Begin()
		if err := Bcast(&v, &Args{Recv: buf, Root: 1}); err != nil || !bytes.Equal(buf, want) {
			t.Errorf("rank %d: bcast after the failed call: %q, %v", r, buf, err)
		}
		x := []byte{byte(r + 1)}
		v = comms[r].Begin()
		if err := Allreduce(&v, &Args{Recv: x, Op: byteMax{}, Elem: 1}); err != nil || x[0] != np {
			t.Errorf("rank %d: allreduce after the failed call: %v, %v", r, x, err)
		}
	})
}

// byteMax is the maximum of bytes, an Op for tests.
type byteMax struct{}

func (byteMax) Apply(in, inout []byte) {
	for i := range inout {
		inout[i] = max(in[i], inout[i])
	}
}

func (byteMax) Commutative() bool { return true }

// TestShmDataOfARankAhead: a reader still in call s finds, through last,
// the data and the length of a rank already in its next call (in the
// ready line's area for up to shmInline bytes, else in the buffer), and
// that a rank which went past s without publishing it did not run s here.
func TestShmDataOfARankAhead(t *testing.T) {
	const n, slot = 3, 256
	stride := 2*line + 2*slot
	mem := make([]byte, line+n*stride)
	ranks := make([]*shmSeg, n) // each rank's own mapping: next, pub
	for r := range ranks {
		ranks[r] = &shmSeg{mem: mem, n: n, slot: slot, stride: stride}
	}
	g := ranks[0] // the reader
	pub := func(r int, s uint64, size int) uint64 {
		b := ranks[r].next
		ranks[r].publish(r, s, b, size)
		ranks[r].next ^= 1
		return b
	}
	at := func(b []byte) uintptr {
		return uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(&mem[0]))
	}
	line1 := uintptr(line + stride) // rank 1's ready line
	check := func(when string, s uint64, size int, want uintptr) {
		t.Helper()
		b, got, ok := g.data(1, s)
		if !ok || got != size || len(b) < size || at(b) != want {
			t.Errorf("%s: data of call %d = offset %d, %d bytes, %v; want offset %d, %d, true", when, s, at(b), got, ok, want, size)
		}
	}
	b5 := pub(1, 5, 20)
	inline5 := line1 + 16 + uintptr(b5)*shmInline
	check("rank 1 in call 5", 5, 20, inline5)
	b6 := pub(1, 6, 100)
	buf6 := line1 + 2*line + uintptr(b6)*slot
	check("rank 1 ahead in call 6", 5, 20, inline5)
	check("rank 1 in call 6", 6, 100, buf6)
	if b6 == b5 {
		t.Fatal("two calls on one buffer")
	}
	pub(1, 7, 0)
	check("rank 1 ahead in call 7", 6, 100, buf6)
	pub(2, 4, 8)
	pub(2, 6, 8) // rank 2 skipped call 5
	if _, _, ok := g.data(2, 5); ok {
		t.Errorf("rank 2 skipped call 5, but data says it ran it")
	}
}

// TestShmCallWords: the ready words' 40-bit call numbers compare by
// serial arithmetic across their wrap, and the ring stamps' 47-bit ones
// name the call a slot held, the latest before the call reusing it.
func TestShmCallWords(t *testing.T) {
	const w40, w47 = uint64(1) << 40, uint64(1) << 47
	word := func(s uint64) uint64 { return s<<readySeq | 5<<readyLen | 1 }
	for _, tc := range []struct {
		v, t uint64
		want bool
	}{
		{word(10), 10, true}, {word(11), 10, true}, {word(9), 10, false},
		{word(w40 - 1), w40 + 1, false}, {word(w40 + 1), w40 - 1, true},
		{word(3*w40 + 2), 3*w40 - 5, true}, {word(3*w40 - 5), 3*w40 + 2, false},
		{word(w40/2 - 1), w40 - 1, false}, // 2^39 calls behind: still behind
		{word(7*w40 + 6), 5, true},        // 7 x 2^40 + 1 ahead: as if one ahead
	} {
		if got := afterReady(tc.v, tc.t); got != tc.want {
			t.Errorf("afterReady(word of %#x, %#x) = %v, want %v", tc.v>>readySeq, tc.t, got, tc.want)
		}
	}
	if !readyOf(word(w40+3), w40+3) || !readyOf(word(w40+3), 2*w40+3) || readyOf(word(w40+3), w40+4) {
		t.Error("readyOf compares the low 40 bits")
	}
	s := w40 + 3
	if v := s<<readySeq | 1<<20<<readyLen | shmAheadBit; readySize(v) != 1<<20 || !readyOf(v, s) || v&shmAheadBit == 0 || v&1 != 0 {
		t.Errorf("ready word %#x: fields overlap", v)
	}
	stamp := func(s uint64, m int) uint64 { return s<<stampSeq | uint64(m) }
	if v := stamp(w47+9, 65536); !stampOf(v, w47+9) || stampOf(v, w47+10) || int(v&stampLen) != 65536 {
		t.Errorf("stamp %#x of call 2^47+9 with 65536 bytes", v)
	}
	for _, tc := range []struct {
		held, s uint64
		want    uint64
		ok      bool
	}{
		{100, 108, 100, true},
		{w47 - 3, w47 + 5, w47 - 3, true},       // across the stamp's wrap
		{2*w47 - 1, 2*w47 + 7, 2*w47 - 1, true}, // and the next
		{w47 + 5, 2*w47 + 5, 0, false},          // 2^47 calls ago: the same bits
		{5, 5 + 1<<30, 0, false},                // older than any rank lags
		{5, 5 + 1<<30 - 1, 5, true},
	} {
		t0, ok := ringHeld(stamp(tc.held, 8), tc.s)
		if ok != tc.ok || ok && t0 != tc.want {
			t.Errorf("ringHeld(stamp of %#x, %#x) = %#x, %v; want %#x, %v", tc.held, tc.s, t0, ok, tc.want, tc.ok)
		}
	}
	if _, ok := ringHeld(0, 9); ok {
		t.Error("a slot never used holds a call")
	}
}
