package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// Bcasts whose root runs ahead (coll/shm.go, "Bcasts that run ahead"): a
// bcast of up to GORUN_COLL_SHM_AHEAD bytes in shared memory goes through
// the root's ring of 8 slots, and its root does not wait for the readers
// of earlier calls.

func init() {
	rankCases["bcast-ahead"] = caseBcastAhead
	rankCases["bcast-ahead-root"] = caseBcastAheadRoot
}

// TestBcastAhead mixes bcasts through the ring (every root, lengths on
// both sides of the ring's limit and of the 56 bytes that share the
// stamp's line) with calls of the segment's buffers (allreduce, a reduce
// whose non-roots leave at once, allgather) and with ranks that fall
// behind, then a long run of bcasts from one root with a slow reader
// (the root comes round its ring), and checks every result. With a limit of 24 bytes most bcasts
// go through the buffers; with 0, none through the ring.
func TestBcastAhead(t *testing.T) {
	for _, tc := range []struct {
		np    int
		ahead string
	}{{2, ""}, {3, ""}, {4, ""}, {3, "24"}, {2, "0"}} {
		name := fmt.Sprintf("np=%d", tc.np)
		var env []string
		if tc.ahead != "" {
			name += "/ahead=" + tc.ahead
			env = append(env, "GORUN_COLL_SHM_AHEAD="+tc.ahead)
		}
		t.Run(name, func(t *testing.T) {
			job{np: tc.np, cas: "bcast-ahead", env: env, timeout: 90 * time.Second}.ok(t)
		})
	}
}

// TestBcastAheadRoot: the root of eight bcasts of 8 bytes finishes them
// while rank 1 has not entered the first: rank 1 enters them only after a
// message the root sends when it is done. Bcasts that wait for their
// readers deadlock here (the job's timeout ends it).
func TestBcastAheadRoot(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "bcast-ahead-root", timeout: 60 * time.Second}.ok(t)
		})
	}
}

func caseBcastAhead(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	sizes := []int{1, 8, 24, 25, 56, 57, 64, 100, 1000, 1024, 1025, 4000}
	fill := func(b []byte, i, root int) {
		for j := range b {
			b[j] = byte(i*31 + root*7 + j*13 + 1)
		}
	}
	for i := range 400 {
		root := (i / 3) % n // three in a row from one root, then the next
		m := sizes[i%len(sizes)]
		buf := make([]byte, m)
		want := make([]byte, m)
		fill(want, i, root)
		if me == root {
			copy(buf, want)
		}
		// A rank falls behind now and then: the others run ahead
		// through the ring meanwhile (those that may).
		if i%17 == 5 && me == (i/17)%n {
			time.Sleep(2 * time.Millisecond)
		}
		if err := mpi.Bcast(w, buf, root); err != nil {
			return fmt.Errorf("call %d: Bcast of %d bytes from %d: %v", i, m, root, err)
		}
		if err := mismatch(fmt.Sprintf("call %d: Bcast of %d bytes from %d", i, m, root), buf, want); err != nil {
			return err
		}
		switch i % 11 {
		case 3:
			x := []int64{int64(me), int64(i)}
			if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil {
				return fmt.Errorf("call %d: Allreduce: %v", i, err)
			}
			if x[0] != int64(n*(n-1)/2) || x[1] != int64(n*i) {
				return fmt.Errorf("call %d: Allreduce: got %v", i, x)
			}
		case 6:
			// The non-roots leave the reduce at once, and the next
			// bcast may be the first through the ring after it.
			out := make([]int32, 3)
			if err := mpi.Reduce(w, []int32{int32(me), 1, int32(i)}, out, mpi.Max, n-1); err != nil {
				return fmt.Errorf("call %d: Reduce: %v", i, err)
			}
			if me == n-1 && (out[0] != int32(n-1) || out[1] != 1 || out[2] != int32(i)) {
				return fmt.Errorf("call %d: Reduce: got %v", i, out)
			}
		case 9:
			all := make([]int32, 2*n)
			if err := mpi.Allgather(w, []int32{int32(me), int32(i)}, all); err != nil {
				return fmt.Errorf("call %d: Allgather: %v", i, err)
			}
			for r := range n {
				if all[2*r] != int32(r) || all[2*r+1] != int32(i) {
					return fmt.Errorf("call %d: Allgather: got %v", i, all)
				}
			}
		}
	}
	// A long run of bcasts from one root, one reader asleep now and
	// then: the root comes round its ring and must wait for the slow
	// reader before it overwrites a slot.
	for i := range 60 {
		m := sizes[i%6] // up to 56 bytes, in the stamp's line
		if i%2 == 1 {
			m = 1000
		}
		buf, want := make([]byte, m), make([]byte, m)
		fill(want, i, 0)
		if me == 0 {
			copy(buf, want)
		}
		if me == n-1 && i%20 == 0 {
			time.Sleep(3 * time.Millisecond)
		}
		if err := mpi.Bcast(w, buf, 0); err != nil {
			return fmt.Errorf("run call %d: Bcast of %d bytes: %v", i, m, err)
		}
		if err := mismatch(fmt.Sprintf("run call %d: Bcast of %d bytes", i, m), buf, want); err != nil {
			return err
		}
	}
	return mpi.Barrier(w)
}

func caseBcastAheadRoot(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	if me == 1 {
		if _, err := mpi.Recv(w, make([]int, 1), 0, 7); err != nil {
			return err
		}
	}
	for i := range 8 {
		buf := []int32{-1, -1}
		if me == 0 {
			buf = []int32{int32(i), int32(100 + i)}
		}
		if err := mpi.Bcast(w, buf, 0); err != nil {
			return fmt.Errorf("Bcast %d: %v", i, err)
		}
		if buf[0] != int32(i) || buf[1] != int32(100+i) {
			return fmt.Errorf("Bcast %d: got %v", i, buf)
		}
	}
	if me == 0 {
		if err := mpi.Send(w, []int{1}, 1, 7); err != nil {
			return err
		}
	}
	x := []int{1}
	if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n {
		return fmt.Errorf("Allreduce after: %v %v", x, err)
	}
	return nil
}
