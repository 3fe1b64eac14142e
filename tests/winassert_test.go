package tests

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Assertions of the window synchronisation calls (MPI_MODE_*), issue 16:
// fences that exchange no counts (ModeNoPrecede) or open no epoch
// (ModeNoSucceed), locks and PSCW epochs that ask nobody (ModeNoCheck),
// each against a sequential result, and the assertions' misuse.

func init() { rankCases["win-assert"] = caseWinAssert }

func caseWinAssert(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	right, left := (me+1)%n, (me-1+n)%n
	buf := make([]int64, 4)
	win, err := mpi.WinCreate(w, buf)
	if err != nil {
		return err
	}
	for round := range 3 {
		if err := firstError(win.Fence(mpi.ModeNoPrecede), win.Put([]int64{int64(100*round + me)}, right, 0),
			win.Accumulate([]int64{1}, 0, 1, mpi.Sum), win.Fence(mpi.ModeNoSucceed|mpi.ModeNoPut)); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if buf[0] != int64(100*round+left) {
			return fmt.Errorf("round %d: Put between ModeNoPrecede and ModeNoSucceed fences: %d, want %d", round, buf[0], 100*round+left)
		}
		if me == 0 && buf[1] != int64(n*(round+1)) {
			return fmt.Errorf("round %d: accumulated %d, want %d", round, buf[1], n*(round+1))
		}
		// ModeNoSucceed opened no epoch.
		if err := win.Put([]int64{1}, right, 0); !errors.Is(err, mpi.ErrRMASync) {
			return fmt.Errorf("Put after a ModeNoSucceed fence: %v, want ErrRMASync", err)
		}
		if err := mpi.Barrier(w); err != nil {
			return err
		}
	}
	// A false ModeNoPrecede is seen.
	if err := firstError(win.Fence(), win.Put([]int64{5}, right, 3)); err != nil {
		return err
	}
	if err := win.Fence(mpi.ModeNoPrecede); !errors.Is(err, mpi.ErrRMASync) {
		return fmt.Errorf("ModeNoPrecede after a Put: %v, want ErrRMASync", err)
	}
	if err := win.Fence(mpi.ModeNoSucceed); err != nil {
		return err
	}
	if buf[3] != 5 {
		return fmt.Errorf("Put completed by the fence after a refused one: %d, want 5", buf[3])
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}

	// A false ModeNoPrecede at one rank only fails there, once the fence
	// is over, and holds the others up in nothing; the next Fence
	// completes its Put.
	if err := win.Fence(); err != nil {
		return err
	}
	if me == 0 {
		if err := win.Put([]int64{9}, right, 3); err != nil {
			return err
		}
	}
	err = win.Fence(mpi.ModeNoPrecede)
	if me == 0 && !errors.Is(err, mpi.ErrRMASync) || me != 0 && err != nil {
		return fmt.Errorf("ModeNoPrecede with a Put at rank 0 only: %v at rank %d", err, me)
	}
	if err := firstError(win.Fence(mpi.ModeNoSucceed), mpi.Barrier(w)); err != nil {
		return err
	}
	if left == 0 && buf[3] != 9 {
		return fmt.Errorf("rank 0's Put, completed by the fence after the refused one: %d, want 9", buf[3])
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}

	// Locks that ask nobody: each rank alone writes its right neighbour's
	// element 2.
	if err := firstError(win.Lock(mpi.LockExclusive, right, mpi.ModeNoCheck), win.Put([]int64{int64(me + 7)}, right, 2),
		win.Unlock(right)); err != nil {
		return err
	}
	if err := firstError(mpi.Barrier(w), win.Sync()); err != nil {
		return err
	}
	if buf[2] != int64(left+7) {
		return fmt.Errorf("Put under a ModeNoCheck lock: %d, want %d", buf[2], left+7)
	}
	got := make([]int64, 1)
	if err := firstError(win.LockAll(mpi.ModeNoCheck), win.Get(got, left, 2), win.UnlockAll()); err != nil {
		return err
	}
	if got[0] != int64((left-1+n)%n+7) {
		return fmt.Errorf("Get under LockAll(ModeNoCheck): %d, want %d", got[0], (left-1+n)%n+7)
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}

	// PSCW without the post messages: every Post is made before any
	// Start (the barrier), as ModeNoCheck promises.
	wg, err := w.Group()
	if err != nil {
		return err
	}
	nbrs := []int{left}
	if right != left {
		nbrs = append(nbrs, right)
	}
	ng, err := wg.Incl(nbrs)
	if err != nil {
		return err
	}
	for round := range 2 {
		if err := firstError(win.Post(ng, mpi.ModeNoCheck|mpi.ModeNoStore), mpi.Barrier(w), win.Start(ng, mpi.ModeNoCheck)); err != nil {
			return err
		}
		if err := firstError(win.Accumulate([]int64{int64(me)}, left, 3, mpi.Replace), win.Complete(), win.Wait()); err != nil {
			return fmt.Errorf("PSCW round %d: %w", round, err)
		}
		if buf[3] != int64(right) {
			return fmt.Errorf("PSCW round %d: %d, want %d", round, buf[3], right)
		}
		if err := mpi.Barrier(w); err != nil {
			return err
		}
	}

	// Assertions a call does not take.
	if err := win.Fence(mpi.ModeNoCheck); !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("Fence(ModeNoCheck): %v, want ErrArg", err)
	}
	if err := win.Lock(mpi.LockShared, me, mpi.ModeNoSucceed); !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("Lock(ModeNoSucceed): %v, want ErrArg", err)
	}
	if err := win.Start(ng, mpi.ModeNoPut); !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("Start(ModeNoPut): %v, want ErrArg", err)
	}
	return firstError(win.Free(), mpi.Barrier(w))
}

func TestWinAssert(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "win-assert"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "win-assert", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
	t.Run("messages/np=3", func(t *testing.T) { job{np: 3, cas: "win-assert", env: []string{"GORUN_RMA_DIRECT=0"}}.ok(t) })
}

// Windows whose ranks disagree on GORUN_RMA_DIRECT (rank 0 turns it off
// for itself): they agree at creation, and every window works, here with
// accumulates, locks and a dynamic window, against the sequential sums.
// And an exclusive locker is not starved by the others' shared epochs.

func init() { rankCases["win-mixed"] = caseWinMixed }

func caseWinMixed(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	if me == 0 {
		os.Setenv("GORUN_RMA_DIRECT", "0") // read at this rank's first window
	}
	for _, mk := range []func() (*mpi.Win[int64], error){
		func() (*mpi.Win[int64], error) { return mpi.WinAllocate[int64](w, 2) },
		func() (*mpi.Win[int64], error) { return mpi.WinCreate(w, make([]int64, 2)) },
	} {
		win, err := mk()
		if err != nil {
			return err
		}
		for range 20 {
			for t := range n {
				if err := firstError(win.Lock(mpi.LockExclusive, t), win.Accumulate([]int64{1, int64(me)}, t, 0, mpi.Sum),
					win.Unlock(t)); err != nil {
					return err
				}
			}
		}
		var old int64
		if err := firstError(mpi.Barrier(w), win.LockAll(), win.FetchAndOp(0, &old, me, 0, mpi.NoOp), win.UnlockAll(), mpi.Barrier(w)); err != nil {
			return err
		}
		if old != int64(20*n) {
			return fmt.Errorf("%v window: %d accumulates counted, want %d", win.Flavor(), old, 20*n)
		}
		if err := win.Free(); err != nil {
			return err
		}
	}

	// Starvation: while the other ranks run shared epochs on every part
	// back to back, rank 1 takes exclusive locks on rank 0's part, then
	// on its own to raise the flag that ends the others' loop.
	win, err := mpi.WinAllocate[int64](w, 1)
	if err != nil {
		return err
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	if me == 1 {
		for range 50 {
			if err := firstError(win.Lock(mpi.LockExclusive, 0), win.Accumulate([]int64{1}, 0, 0, mpi.Sum), win.Unlock(0)); err != nil {
				return err
			}
		}
		if err := firstError(win.Lock(mpi.LockExclusive, 1), win.Put([]int64{1}, 1, 0), win.Unlock(1)); err != nil {
			return err
		}
	} else if n > 1 {
		flag := make([]int64, 1)
		for flag[0] == 0 {
			if err := firstError(win.LockAll(), win.Get(flag, 1, 0), win.UnlockAll()); err != nil {
				return err
			}
		}
	}
	if err := firstError(mpi.Barrier(w), win.Sync()); err != nil {
		return err
	}
	if me == 0 && n > 1 && win.Local()[0] != 50 {
		return fmt.Errorf("exclusive epochs among shared ones: counter %d, want 50", win.Local()[0])
	}
	return firstError(win.Free(), mpi.Barrier(w))
}

func TestWinMixed(t *testing.T) {
	for _, np := range []int{2, 3} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "win-mixed"}.ok(t) })
	}
}
