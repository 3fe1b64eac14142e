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
