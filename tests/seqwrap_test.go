package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// Collective calls past the widths their numbers are stored in
// (coll/shm.go, "Call numbers in the words"): every communicator's calls
// are numbered from GORUN_COLL_SEQ_START on, a few hundred calls before
// 2^32 (where the numbers wrapped until 2026-11-27: a correct program
// then failed with mismatched counts), 2^40 (the ready words' field) and
// 2^47 (the ring stamps'), and the calls that cross it run every
// shared-memory path: bcasts through the ring and the buffers, the small
// reductions every rank folds, the owners' folds, the tree, allgather,
// alltoall and the barrier, each result checked.

func init() {
	rankCases["seq-wrap"] = caseSeqWrap
}

func TestCollSeqWrap(t *testing.T) {
	for _, start := range []struct {
		name string
		at   uint64
	}{{"2^32", 1 << 32}, {"2^40", 1 << 40}, {"2^47", 1 << 47}} {
		for _, tc := range []struct {
			name string
			np   int
			env  []string
		}{
			{"np=3", 3, nil},
			{"np=4/tree", 4, []string{"GORUN_COLL_SHM_TREE=2", "GORUN_COLL_SHM_RADIX=2"}},
		} {
			t.Run(start.name+"/"+tc.name, func(t *testing.T) {
				env := append([]string{fmt.Sprintf("GORUN_COLL_SEQ_START=%d", start.at-300)}, tc.env...)
				job{np: tc.np, cas: "seq-wrap", env: env, timeout: 90 * time.Second}.ok(t)
			})
		}
	}
}

// TestCollSeqStretch: a communicator's calls with long stretches of
// calls of no shared-memory algorithm between them, which leave its ready
// words far behind: the numbering jumps 2^39+3 (past the ready words'
// serial-number window) or 2^38+3 after every 64th call
// (GORUN_COLL_SEQ_SKIP; without the bcast ring, whose stamps take a slot
// as free 2^30 calls on), through the same mix of every shm path with
// slow ranks. Before shmRenew a rank read another's word of a call 2^39
// calls back as a later one and went on without waiting for it.
func TestCollSeqStretch(t *testing.T) {
	for _, skip := range []struct {
		name string
		by   uint64
	}{{"2^39", 1<<39 + 3}, {"2^38", 1<<38 + 3}} {
		for _, tc := range []struct {
			name string
			np   int
			env  []string
		}{
			{"np=3", 3, nil},
			{"np=4/tree", 4, []string{"GORUN_COLL_SHM_TREE=2", "GORUN_COLL_SHM_RADIX=2"}},
		} {
			t.Run(skip.name+"/"+tc.name, func(t *testing.T) {
				env := append([]string{fmt.Sprintf("GORUN_COLL_SEQ_SKIP=%d", skip.by), "GORUN_COLL_SHM_AHEAD=0"}, tc.env...)
				job{np: tc.np, cas: "seq-wrap", env: env, timeout: 90 * time.Second}.ok(t)
			})
		}
	}
}

func caseSeqWrap(w *mpi.Comm) error {
	if err := caseBcastAhead(w); err != nil { // about 560 calls
		return err
	}
	n, me := w.Size(), w.Rank()
	for i := range 100 {
		if err := mpi.Barrier(w); err != nil {
			return fmt.Errorf("round %d: Barrier: %v", i, err)
		}
		// 8 KiB a rank: more than GORUN_COLL_SHM_ALLREAD in all, so
		// owners fold segments (below the tree's limit at np=4/tree).
		m := 1024
		if i%2 == 1 {
			m = 3 // every rank folds them itself, or the tree
		}
		x := make([]float64, m)
		for j := range x {
			x[j] = float64(me*m + j + i)
		}
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil {
			return fmt.Errorf("round %d: Allreduce of %d: %v", i, m, err)
		}
		for j := range x {
			if want := float64(n*(n-1)/2*m + n*(j+i)); x[j] != want {
				return fmt.Errorf("round %d: Allreduce of %d: element %d is %v, want %v", i, m, j, x[j], want)
			}
		}
		send, recv := make([]int32, 2*n), make([]int32, 2*n)
		for r := range n {
			send[2*r], send[2*r+1] = int32(me), int32(r+i)
		}
		if err := mpi.Alltoall(w, send, recv); err != nil {
			return fmt.Errorf("round %d: Alltoall: %v", i, err)
		}
		for r := range n {
			if recv[2*r] != int32(r) || recv[2*r+1] != int32(me+i) {
				return fmt.Errorf("round %d: Alltoall: got %v", i, recv)
			}
		}
	}
	return nil
}
