package tests

import (
	"errors"
	"fmt"
	"os"
	"strconv"
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
	rankCases["bcast-ahead-mismatch"] = caseBcastAheadMismatch
	rankCases["bcast-ahead-reduce-abort"] = caseBcastAheadReduceAbort
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
// readers deadlock here (the job's timeout ends it). Then a bcast whose
// ring slot held the bcast eight calls before, with seven scatters (no
// shm algorithm) between, at a root that must not wait for rank 1 to
// enter it either. With GORUN_COLL_SHM_AHEAD=0 the first part
// deadlocks, not the second (the bcasts through the buffers wait for
// the previous shm call only).
func TestBcastAheadRoot(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "bcast-ahead-root", timeout: 60 * time.Second, env: []string{"GORUN_COLL_SHM_AHEAD=1024"}}.ok(t)
		})
	}
}

// TestBcastAheadMismatch: counts on either side of the ring's limit at
// the root and at a reader, and two different counts through the ring,
// fail as a mismatch, and the communicator works after: found in shared
// memory itself with the stall check off, and with it on as by default.
func TestBcastAheadMismatch(t *testing.T) {
	for _, tc := range []struct {
		np    int
		stall string
	}{{2, "0"}, {3, "0"}, {3, "300ms"}} {
		t.Run(fmt.Sprintf("np=%d/stall=%s", tc.np, tc.stall), func(t *testing.T) {
			job{np: tc.np, cas: "bcast-ahead-mismatch", timeout: 60 * time.Second, env: []string{"GORUN_COLL_STALL=" + tc.stall}}.ok(t)
		})
	}
}

func caseBcastAheadMismatch(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	for _, k := range [][2]int{{100, 2000}, {2000, 100}, {8, 16}} {
		m := k[0]
		if me == n-1 {
			m = k[1]
		}
		err := mpi.Bcast(w, make([]byte, m), 0)
		if err == nil && me == n-1 {
			return fmt.Errorf("bcast of %d bytes into %d succeeded", k[0], k[1])
		}
		if err != nil && !errors.Is(err, mpi.ErrCount) && !errors.Is(err, mpi.ErrTruncate) {
			return fmt.Errorf("bcast of %d bytes into %d: %v", k[0], k[1], err)
		}
		x := []int{me}
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n*(n-1)/2 {
			return fmt.Errorf("after a bcast of %d bytes into %d: allreduce %v %v", k[0], k[1], x, err)
		}
	}
	// A reader that fails a bcast is done with the root's ring slot too,
	// whether it ran the call through the ring (a count within the
	// limit) or through the buffers (above it): a mismatched bcast,
	// then seven scatters (no shm algorithm), then a bcast on the same
	// slot, which the root must not wait in for rank n-1 to enter (rank
	// n-1 first receives from the root, which sends after it).
	for _, bad := range []int{2, 200} {
		if err := failedReadThenReuse(w, bad); err != nil {
			return fmt.Errorf("rank %d's count %d: %v", n-1, bad, err)
		}
	}
	return nil
}

// failedReadThenReuse is the last part of caseBcastAheadMismatch: the root
// bcasts one int64, rank n-1 expects bad of them.
func failedReadThenReuse(w *mpi.Comm, bad int) error {
	n, me := w.Size(), w.Rank()
	m := 1
	if me == n-1 {
		m = bad
	}
	err := mpi.Bcast(w, make([]int64, m), 0)
	if (err == nil) == (me == n-1) && me != 0 {
		return fmt.Errorf("bcast of 1 element into %d: %v", m, err)
	}
	if me == n-1 {
		if _, err := mpi.Recv(w, make([]int, 1), 0, 9); err != nil {
			return err
		}
	}
	for i := range 7 {
		var all []int32
		if me == 0 {
			all = make([]int32, n)
		}
		if err := mpi.Scatter(w, all, make([]int32, 1), 0); err != nil {
			return fmt.Errorf("scatter %d: %v", i, err)
		}
	}
	b := []int64{0}
	if me == 0 {
		b[0] = 5
	}
	if err := mpi.Bcast(w, b, 0); err != nil || b[0] != 5 {
		return fmt.Errorf("bcast on the mismatched one's slot: %v %v", b, err)
	}
	if me == 0 {
		return mpi.Send(w, []int{1}, n-1, 9)
	}
	return nil
}

// TestBcastAheadReduceAbort: a reduce that some ranks fail before its
// algorithm (an invalid op) fails at its root, also when those ranks
// then read a bcast through the ring before the root has seen the abort
// (a reader's mark of the bcast once shared the word that says which
// call a reduce owner has folded: the root took it for the owners' and
// returned its own contribution as the result, with no error). Owners
// fold (GORUN_COLL_SHM_ALLREAD=0); the root is the last rank.
func TestBcastAheadReduceAbort(t *testing.T) {
	for _, bad := range []string{"1", "2"} {
		t.Run("failing="+bad, func(t *testing.T) {
			job{np: 3, cas: "bcast-ahead-reduce-abort", timeout: 60 * time.Second,
				env: []string{"GORUN_COLL_SHM_ALLREAD=0", "GORUN_TEST_FAILING=" + bad}}.ok(t)
		})
	}
}

func caseBcastAheadReduceAbort(w *mpi.Comm) error {
	me := w.Rank()
	failing, _ := strconv.Atoi(os.Getenv("GORUN_TEST_FAILING"))
	for i := range 20 {
		b := []int64{int64(i)}
		if err := mpi.Bcast(w, b, 1); err != nil {
			return fmt.Errorf("round %d: Bcast: %v", i, err)
		}
		if me == 2 && failing == 2 {
			time.Sleep(20 * time.Millisecond) // the failing ranks go on to the bcast first
		}
		op := mpi.Sum
		if me < failing {
			op = mpi.Op{}
		}
		out := make([]int64, 1)
		err := mpi.Reduce(w, []int64{int64(100 + me)}, out, op, 2)
		if me == 2 && err == nil {
			return fmt.Errorf("round %d: Reduce succeeded at the root with %v while ranks below %d failed it", i, out, failing)
		}
		if me < failing && err == nil {
			return fmt.Errorf("round %d: Reduce with an invalid op succeeded", i)
		}
		// A bcast through the ring from rank 1, which the failing
		// ranks read while the root may still be in the reduce.
		b[0] = 7
		if err := mpi.Bcast(w, b, 1); err != nil || b[0] != 7 {
			return fmt.Errorf("round %d: Bcast after: %v %v", i, b, err)
		}
		if err := mpi.Barrier(w); err != nil {
			return fmt.Errorf("round %d: Barrier: %v", i, err)
		}
	}
	return nil
}

func caseBcastAhead(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	sizes := []int{0, 1, 8, 24, 25, 56, 57, 64, 100, 1000, 1024, 1025, 4000}
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
		m := sizes[i%6] // up to 56 bytes, in the stamp's line (or none)
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
	// A bcast, seven scatters (no shm algorithm: they publish nothing
	// in the segment), and a bcast on the first one's ring slot. Rank 1
	// enters the scatters only after the root's message, which the root
	// sends after the second bcast: the root must see that rank 1 has
	// read the first without waiting for it to enter the second.
	bcast := func(v int32) error {
		buf := []int32{-1}
		if me == 0 {
			buf[0] = v
		}
		if err := mpi.Bcast(w, buf, 0); err != nil {
			return err
		}
		if buf[0] != v {
			return fmt.Errorf("Bcast: got %d, want %d", buf[0], v)
		}
		return nil
	}
	if err := bcast(41); err != nil {
		return err
	}
	if me == 1 {
		if _, err := mpi.Recv(w, make([]int, 1), 0, 8); err != nil {
			return err
		}
	}
	scatters := func() error {
		for i := range 7 {
			var all []int32
			if me == 0 {
				all = make([]int32, n)
				for r := range all {
					all[r] = int32(10*i + r)
				}
			}
			got := make([]int32, 1)
			if err := mpi.Scatter(w, all, got, 0); err != nil {
				return fmt.Errorf("Scatter %d: %v", i, err)
			}
			if got[0] != int32(10*i+me) {
				return fmt.Errorf("Scatter %d: got %d", i, got[0])
			}
		}
		return nil
	}
	if me != 1 {
		if err := scatters(); err != nil {
			return err
		}
		if me == 0 {
			// Ranks 2.. are in the second bcast by now or soon; rank
			// 1 is in its Recv.
			if err := bcast(42); err != nil {
				return err
			}
			return mpi.Send(w, []int{1}, 1, 8)
		}
		return bcast(42)
	}
	if err := scatters(); err != nil {
		return err
	}
	return bcast(42)
}
