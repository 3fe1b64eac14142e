package coll

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	_ "github.com/gorun/gorun/btl/sm"
	"github.com/gorun/gorun/p2p"
)

// shmPairCase is one collective of 8 bytes (or none, barrier) between two
// ranks: its arguments over a rank's x (24 bytes: eight of 10+rank, then
// zeros) and the check of its result (the same at both ranks).
type shmPairCase struct {
	name  string
	call  func(*Comm, *Args) error
	args  func(x []byte) Args
	check func(a *Args) error
}

var shmPairCases = []shmPairCase{
	{"barrier", Barrier, func([]byte) Args { return Args{} }, nil},
	{"allreduce-8B", Allreduce,
		func(x []byte) Args { return Args{Recv: x[:8], Op: byteMax{}, Elem: 1} },
		func(a *Args) error { return want(a.Recv, bytes.Repeat([]byte{11}, 8)) }},
	{"allgather-8B", Allgather,
		func(x []byte) Args { return Args{Send: x[:8], Recv: x[8:24]} },
		func(a *Args) error {
			return want(a.Recv, append(bytes.Repeat([]byte{10}, 8), bytes.Repeat([]byte{11}, 8)...))
		}},
	{"bcast-8B", Bcast,
		func(x []byte) Args { return Args{Recv: x[:8], Root: 0} },
		func(a *Args) error { return want(a.Recv, bytes.Repeat([]byte{10}, 8)) }},
}

func want(got, w []byte) error {
	if !bytes.Equal(got, w) {
		return fmt.Errorf("got %v, want %v", got, w)
	}
	return nil
}

// shmPair makes two ranks of this process over btl/sm with a
// communicator each, and checks that their first call (a barrier) ran in
// shared memory: a segment that could not be made would leave them on
// the point-to-point algorithms unnoticed.
func shmPair(tb testing.TB) []Comm {
	if !shmOn() {
		tb.Skip("GORUN_COLL_SHM=0")
	}
	if runtime.GOMAXPROCS(0) < 2 {
		tb.Skip("two spinning ranks need two Ps (GOMAXPROCS >= 2)")
	}
	const np, ctx = 2, 12
	SetJob(fmt.Sprintf("collpair%d", os.Getpid()))
	engs := openEnginesOn(tb, np, "sm")
	comms := make([]Comm, np)
	for r := range np {
		comms[r] = NewComm(engs[r], ctx, []int{0, 1}, r, nil)
		tb.Cleanup(comms[r].sh.shm.close)
	}
	ranks(tb, engs, func(r int) {
		v := comms[r].Begin()
		if err := pairCall(&v, Barrier, &Args{}); err != nil {
			tb.Errorf("rank %d: first barrier: %v", r, err)
		}
	})
	for r := range np {
		if comms[r].sh.shm.seg.Load() == nil {
			tb.Fatalf("rank %d has no shared-memory segment", r)
		}
	}
	return comms
}

// runPair runs n calls of cs at both ranks, each a view and arguments made
// once (made per call they escape, and the collector they bring along is
// no part of a call's cost: package mpi keeps them in a pool); check, if
// set, looks at the last result.
func runPair(tb testing.TB, comms []Comm, cs shmPairCase, n int, check bool) {
	engs := []*p2p.Engine{comms[0].E, comms[1].E}
	ranks(tb, engs, func(r int) {
		x := make([]byte, 24) // 8 bytes of 10+r, then zeros
		copy(x, bytes.Repeat([]byte{byte(10 + r)}, 8))
		a := cs.args(x)
		v := new(Comm)
		for range n {
			*v = comms[r].Begin()
			if err := pairCall(v, cs.call, &a); err != nil {
				tb.Errorf("rank %d: %s: %v", r, cs.name, err)
				return
			}
		}
		if check && cs.check != nil {
			if err := cs.check(&a); err != nil {
				tb.Errorf("rank %d: %s: %v", r, cs.name, err)
			}
		}
	})
}

// pairCall prepares the view v and makes the call.
func pairCall(v *Comm, call func(*Comm, *Args) error, a *Args) error {
	if err := v.Prepare(); err != nil {
		return err
	}
	return call(v, a)
}

// TestShmPair: the shared-memory collectives between two ranks of this
// process over btl/sm (what BenchmarkShmNp2 times) give the right results.
func TestShmPair(t *testing.T) {
	comms := shmPair(t)
	for _, cs := range shmPairCases {
		runPair(t, comms, cs, 100, true)
	}
}

// BenchmarkShmNp2 times the shared-memory collectives of two ranks in
// this process (a goroutine each, over the segment the ranks of a job
// map): the line transfers between two cores and this package's own
// bookkeeping a call, without package mpi's. Each op is one call at both
// ranks. Runs longer than a minute trip ranks' hang check.
func BenchmarkShmNp2(b *testing.B) {
	comms := shmPair(b)
	for _, cs := range shmPairCases {
		b.Run(cs.name, func(b *testing.B) { runPair(b, comms, cs, b.N, false) })
	}
}

// TestShmBcastPiped: bcasts larger than a chunk go through the root's
// buffer a chunk at a time (shmPipeChunk); sizes of one chunk and one
// byte, not a whole number of chunks and a whole slot, from either root,
// each call's data new, arrive whole at the other rank.
func TestShmBcastPiped(t *testing.T) {
	comms := shmPair(t)
	if comms[0].sh.shm.seg.Load().ring == 0 {
		t.Skip("no ring (GORUN_COLL_SHM_AHEAD=0): no progress words")
	}
	sizes := []int{shmPipeChunk + 1, 20000, 64 << 10, shmPipeChunk}
	engs := []*p2p.Engine{comms[0].E, comms[1].E}
	ranks(t, engs, func(r int) {
		buf := make([]byte, 64<<10)
		v := new(Comm)
		bad := false // report the first wrong byte, and go on: the other rank waits in the next call
		for i := range 1000 {
			m, root := sizes[i%len(sizes)], i/len(sizes)%2
			for j := range m {
				if r == root {
					buf[j] = byte(i*7 + j*13)
				} else {
					buf[j] = 0xee
				}
			}
			if r == root && i%2 == 1 {
				// The reader waits first, and takes chunks while the
				// root copies the rest.
				time.Sleep(20 * time.Microsecond)
			}
			*v = comms[r].Begin()
			if err := pairCall(v, Bcast, &Args{Recv: buf[:m], Root: root}); err != nil {
				t.Errorf("rank %d: call %d (%d bytes from rank %d): %v", r, i, m, root, err)
				return
			}
			for j := range m {
				if buf[j] != byte(i*7+j*13) && !bad {
					t.Errorf("rank %d: call %d (%d bytes from rank %d): byte %d is %#x, want %#x", r, i, m, root, j, buf[j], byte(i*7+j*13))
					bad = true
				}
			}
		}
	})
}
