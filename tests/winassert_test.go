package tests

import (
	"errors"
	"fmt"
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
}
