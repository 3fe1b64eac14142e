package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Shared-memory windows (MPI_Win_allocate_shared, MPI_Win_shared_query),
// issue 16: every rank stores into its own part directly, every rank reads
// every part directly and through the window's operations, and a rank's
// Put into another's part is seen by that rank's direct loads.

func init() {
	rankCases["win-shared"] = caseWinShared
	rankCases["win-shared-errors"] = caseWinSharedErrors
}

// winSharedLen is rank r's part length: different at every rank, and empty
// at rank 1.
func winSharedLen(r int) int {
	if r == 1 {
		return 0
	}
	return 3 + 5*r
}

func winSharedVal(r, i int) float64 { return float64(r*1000+i) + 0.5 }

func caseWinShared(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	win, err := mpi.WinAllocateShared[float64](w, winSharedLen(me))
	if err != nil {
		return err
	}
	local := win.Local()
	if len(local) != winSharedLen(me) {
		return fmt.Errorf("Local: %d elements, want %d", len(local), winSharedLen(me))
	}
	for i, v := range local {
		if v != 0 {
			return fmt.Errorf("Local[%d] = %v before any store, want 0", i, v)
		}
		local[i] = winSharedVal(me, i)
	}
	// Direct stores, then the window's synchronization and a barrier:
	// MPI's unified model for shared windows.
	if err := firstError(win.Sync(), mpi.Barrier(w), win.Sync()); err != nil {
		return err
	}
	for r := range n {
		part, err := win.SharedQuery(r)
		if err != nil {
			return fmt.Errorf("SharedQuery(%d): %w", r, err)
		}
		if len(part) != winSharedLen(r) {
			return fmt.Errorf("SharedQuery(%d): %d elements, want %d", r, len(part), winSharedLen(r))
		}
		for i, v := range part {
			if v != winSharedVal(r, i) {
				return fmt.Errorf("rank %d's part[%d] read directly = %v, want %v", r, i, v, winSharedVal(r, i))
			}
		}
	}
	// The window's own operations on the same memory: each rank Gets its
	// right neighbour's part, then Puts into its left neighbour's last
	// element; the left neighbour then sees the Put in its direct loads.
	right, left := (me+1)%n, (me-1+n)%n
	if err := win.Fence(); err != nil {
		return err
	}
	got := make([]float64, winSharedLen(right))
	if len(got) > 0 {
		if err := win.Get(got, right, 0); err != nil {
			return err
		}
	}
	// (The Put goes in the next epoch: in this one another rank reads that
	// element.)
	if err := win.Fence(); err != nil {
		return err
	}
	if k := winSharedLen(left); k > 0 {
		if err := win.Put([]float64{-float64(me)}, left, k-1); err != nil {
			return err
		}
	}
	if err := win.Fence(); err != nil {
		return err
	}
	for i, v := range got {
		if v != winSharedVal(right, i) {
			return fmt.Errorf("Get of rank %d's part[%d] = %v, want %v", right, i, v, winSharedVal(right, i))
		}
	}
	if k := len(local); k > 0 {
		if want := -float64((me + 1) % n); local[k-1] != want {
			return fmt.Errorf("own last element after the right neighbour's Put = %v, want %v", local[k-1], want)
		}
	}
	// Two shared windows at once get segments of their own.
	win2, err := mpi.WinAllocateShared[int32](w, 1)
	if err != nil {
		return err
	}
	p, _ := win2.SharedQuery((me + 1) % n)
	if len(p) != 1 || p[0] != 0 {
		return fmt.Errorf("second window: %v, want [0]", p)
	}
	if err := firstError(win2.Free(), win.Free()); err != nil {
		return err
	}
	if _, err := win.SharedQuery(0); !errors.Is(err, mpi.ErrWin) {
		return fmt.Errorf("SharedQuery after Free: %v, want ErrWin", err)
	}
	return mpi.Barrier(w)
}

func caseWinSharedErrors(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	// A negative length at the last rank fails the call at every rank.
	k := 2
	if me == n-1 {
		k = -1
	}
	if _, err := mpi.WinAllocateShared[int64](w, k); !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("WinAllocateShared with -1 at rank %d: %v, want ErrArg at every rank", n-1, err)
	}
	// SharedQuery on a window that is not shared, and out of range.
	plain, err := mpi.WinAllocate[int64](w, 2)
	if err != nil {
		return err
	}
	if _, err := plain.SharedQuery(0); !errors.Is(err, mpi.ErrWin) {
		return fmt.Errorf("SharedQuery on WinAllocate's window: %v, want ErrWin", err)
	}
	sh, err := mpi.WinAllocateShared[int64](w, 2)
	if err != nil {
		return err
	}
	if _, err := sh.SharedQuery(n); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("SharedQuery(%d): %v, want ErrRank", n, err)
	}
	if err := firstError(sh.Free(), plain.Free()); err != nil {
		return err
	}
	// No segment is left behind once the windows are made.
	if m, _ := filepath.Glob("/dev/shm/gorun-" + os.Getenv("GORUN_JOBID") + "-win-*"); len(m) > 0 {
		return fmt.Errorf("segments left under /dev/shm: %v", m)
	}
	return mpi.Barrier(w)
}

// caseWinSharedHosts (GORUN_COLL_FAKE_NODES=2): ranks on two pretend hosts
// cannot share memory.
func caseWinSharedHosts(w *mpi.Comm) error {
	if _, err := mpi.WinAllocateShared[int64](w, 1); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("WinAllocateShared across two hosts: %v, want ErrComm", err)
	}
	return mpi.Barrier(w)
}

func init() { rankCases["win-shared-hosts"] = caseWinSharedHosts }

// caseWinSharedSplit: the two communicators of a Split (one per color,
// one context id) make their shared windows at once; each gets a segment
// of its own (their names once collided, and one side's window failed).
func caseWinSharedSplit(w *mpi.Comm) error {
	sub, err := w.Split(w.Rank()%2, w.Rank())
	if err != nil {
		return err
	}
	if err := caseWinShared(sub); err != nil {
		return fmt.Errorf("color %d: %w", w.Rank()%2, err)
	}
	return firstError(sub.Free(), mpi.Barrier(w))
}

func init() { rankCases["win-shared-split"] = caseWinSharedSplit }

func TestWinShared(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "win-shared"}.ok(t) })
	}
	t.Run("errors", func(t *testing.T) { job{np: 3, cas: "win-shared-errors"}.ok(t) })
	t.Run("split", func(t *testing.T) { job{np: 4, cas: "win-shared-split"}.ok(t) })
	t.Run("two-hosts", func(t *testing.T) {
		job{np: 2, cas: "win-shared-hosts", env: []string{"GORUN_COLL_FAKE_NODES=2"}}.ok(t)
	})
}
