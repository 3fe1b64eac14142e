package tests

import (
	"errors"
	"fmt"
	"slices"
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
	rankCases["seq-renew-onefails"] = caseRenewOneFails
}

func TestCollSeqWrap(t *testing.T) {
	for _, start := range []struct {
		name string
		at   uint64
	}{{"2^32", 1 << 32}, {"2^40", 1 << 40}, {"2^47", 1 << 47}} {
		seqWrapJobs(t, start.name, fmt.Sprintf("GORUN_COLL_SEQ_START=%d", start.at-300))
	}
}

// seqWrapJobs runs the seq-wrap case at np=3 and at np=4 through the
// reduction tree, with env, as subtests under name.
func seqWrapJobs(t *testing.T, name string, env ...string) {
	for _, tc := range []struct {
		name string
		np   int
		env  []string
	}{
		{"np=3", 3, nil},
		{"np=4/tree", 4, []string{"GORUN_COLL_SHM_TREE=2", "GORUN_COLL_SHM_RADIX=2"}},
	} {
		t.Run(name+"/"+tc.name, func(t *testing.T) {
			job{np: tc.np, cas: "seq-wrap", env: append(slices.Clone(env), tc.env...), timeout: 90 * time.Second}.ok(t)
		})
	}
}

// TestCollSeqStretch: a communicator's calls with long stretches of
// calls of no shared-memory algorithm between them, which leave its ready
// words far behind: the numbering jumps 2^39+3 (past the ready words'
// serial-number window) or 2^37+3 after every 64th call
// (GORUN_COLL_SEQ_SKIP), through the same mix of every shm path with slow
// ranks, with the bcast ring and without. Before shmRenew a rank read
// another's word of a call 2^39 calls back as a later one and went on
// without waiting for it (2^39 failed; 2^37 is the control: its words
// were read right, and it runs a renewal at every jump).
//
// seq-renew-onefails: at the call that starts an epoch (which renews the
// words), one rank fails a Bcast's arguments while the others enter it,
// and later an Allreduce's count; the next calls must still run
// everywhere. A first version renewed when a rank's previous shm call was
// 2^38 calls back, which the failing rank reckoned from an older call
// than the others: it renewed alone, and waited forever for them.
func TestCollSeqStretch(t *testing.T) {
	for _, skip := range []struct {
		name string
		env  []string
	}{
		{"2^39", []string{fmt.Sprintf("GORUN_COLL_SEQ_SKIP=%d", 1<<39+3)}},
		{"2^39/no-ring", []string{fmt.Sprintf("GORUN_COLL_SEQ_SKIP=%d", 1<<39+3), "GORUN_COLL_SHM_AHEAD=0"}},
		{"2^37", []string{fmt.Sprintf("GORUN_COLL_SEQ_SKIP=%d", 1<<37+3)}},
	} {
		seqWrapJobs(t, skip.name, skip.env...)
	}
	t.Run("one-fails", func(t *testing.T) {
		job{np: 3, cas: "seq-renew-onefails", env: []string{fmt.Sprintf("GORUN_COLL_SEQ_SKIP=%d", 1<<37+3)}, timeout: 60 * time.Second}.ok(t)
	})
}

// caseRenewOneFails: 64 Barriers on a Dup (the numbering jumps 2^37+3
// after the 64th), then a Bcast whose root is bad at rank 1 alone, the
// first call of a new epoch (every rank renews the words before it, rank
// 1 too); Barriers and Allreduces in the same epoch; 60 Ibarriers (past
// the next jump); then an Allreduce whose count is wrong at rank 1, the
// first blocking call of that epoch (its abort must not split the
// renewal); and again Barriers and Allreduces, which must run and sum
// right everywhere.
func caseRenewOneFails(w *mpi.Comm) error {
	c, err := w.Dup()
	if err != nil {
		return err
	}
	defer c.Free()
	n := c.Size()
	calls := func(when string) error {
		for i := range 5 {
			if err := mpi.Barrier(c); err != nil {
				return fmt.Errorf("Barrier %d %s: %v", i, when, err)
			}
			x := []int64{int64(c.Rank() + i)}
			if err := mpi.Allreduce(c, x, x, mpi.Sum); err != nil {
				return fmt.Errorf("Allreduce %d %s: %v", i, when, err)
			}
			if want := int64(n*(n-1)/2 + n*i); x[0] != want {
				return fmt.Errorf("Allreduce %d %s: %d, want %d", i, when, x[0], want)
			}
		}
		return nil
	}
	for i := range 64 {
		if err := mpi.Barrier(c); err != nil {
			return fmt.Errorf("Barrier %d: %v", i, err)
		}
	}
	root := 0
	if c.Rank() == 1 {
		root = 99
	}
	err = mpi.Bcast(c, []int{1, 2, 3}, root)
	if c.Rank() == 1 && !errors.Is(err, mpi.ErrRoot) {
		return fmt.Errorf("Bcast with root 99: %v, want ErrRoot", err)
	}
	if err := calls("after the failed Bcast"); err != nil {
		return err
	}
	for i := range 50 { // through the call numbered 2^37+128, after which the numbering jumps
		q, err := mpi.Ibarrier(c)
		if err == nil {
			_, err = q.Wait()
		}
		if err != nil {
			return fmt.Errorf("Ibarrier %d: %v", i, err)
		}
	}
	x := make([]int64, 1+c.Rank()%2) // rank 1 passes 2 elements, the others 1
	err = mpi.Allreduce(c, x, x, mpi.Sum)
	if c.Rank() == 1 && err == nil {
		return fmt.Errorf("Allreduce with a wrong count at rank 1: no error")
	}
	return calls("after the failed Allreduce")
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
