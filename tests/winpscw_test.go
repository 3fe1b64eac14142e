package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Generalized active-target synchronization (Post, Start, Complete, Wait),
// issue 16: a periodic halo exchange among neighbours only, many origins
// accumulating into one target, and the epochs' misuse, each against a
// sequential result.

func init() { rankCases["win-pscw"] = caseWinPSCW }

func caseWinPSCW(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	wg, err := w.Group()
	if err != nil {
		return err
	}
	left, right := (me-1+n)%n, (me+1)%n
	nbrs := []int{left}
	if right != left {
		nbrs = append(nbrs, right)
	}
	ng, err := wg.Incl(nbrs)
	if err != nil {
		return err
	}

	// Halo exchange: m interior points and one ghost each side; each step
	// every rank Puts its edge points into its neighbours' ghosts inside
	// a Post/Start ... Complete/Wait epoch with its neighbours only.
	const m, steps = 6, 5
	u := make([]float64, m+2)
	for i := range m {
		u[i+1] = haloInit(me*m + i)
	}
	win, err := mpi.WinCreate(w, u)
	if err != nil {
		return err
	}
	global := make([]float64, n*m)
	for g := range global {
		global[g] = haloInit(g)
	}
	for s := range steps {
		if err := firstError(win.Post(ng), win.Start(ng)); err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		// My first point is the left neighbour's right ghost (m+1), my
		// last the right neighbour's left ghost (0).
		if err := firstError(win.Put(u[1:2], left, m+1), win.Put(u[m:m+1], right, 0)); err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		if err := firstError(win.Complete(), win.Wait()); err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		next := make([]float64, m)
		for i := range m {
			next[i] = (u[i] + u[i+2]) / 2
		}
		copy(u[1:m+1], next)
		global = haloStep(global)
	}
	for i := range m {
		if want := global[me*m+i]; u[i+1] != want {
			return fmt.Errorf("halo: point %d after %d steps = %v, want %v", me*m+i, steps, u[i+1], want)
		}
	}
	if err := win.Free(); err != nil {
		return err
	}

	// Many origins, one target: rank 0 exposes its counters to every
	// other rank, which adds its rank to counter 0 and 1 to counter 1.
	acc, err := mpi.WinAllocate[int64](w, 2)
	if err != nil {
		return err
	}
	others, err := wg.Excl([]int{0})
	if err != nil {
		return err
	}
	zero, err := wg.Incl([]int{0})
	if err != nil {
		return err
	}
	for round := range 3 {
		if me == 0 {
			if err := acc.Post(others); err != nil {
				return err
			}
			if round == 1 {
				// Win.Test instead of Wait: poll until the epoch ends.
				for {
					done, err := acc.Test()
					if err != nil {
						return fmt.Errorf("round %d at rank 0: Test: %w", round, err)
					}
					if done {
						break
					}
				}
				if _, err := acc.Test(); !errors.Is(err, mpi.ErrRMASync) {
					return fmt.Errorf("Test after the epoch ended: %v, want ErrRMASync", err)
				}
			} else if err := acc.Wait(); err != nil {
				return fmt.Errorf("round %d at rank 0: %w", round, err)
			}
			sum := int64(n * (n - 1) / 2)
			if got := acc.Local(); got[0] != int64(round+1)*sum || got[1] != int64(round+1)*int64(n-1) {
				return fmt.Errorf("round %d: counters %v, want [%d %d]", round, got, int64(round+1)*sum, int64(round+1)*int64(n-1))
			}
			continue
		}
		if err := acc.Start(zero); err != nil {
			return err
		}
		if err := firstError(acc.Accumulate([]int64{int64(me), 1}, 0, 0, mpi.Sum), acc.Complete()); err != nil {
			return fmt.Errorf("round %d at rank %d: %w", round, me, err)
		}
	}

	// Misuse: every check is local, so every rank runs them.
	for name, f := range map[string]func() error{
		"Complete without Start": acc.Complete,
		"Wait without Post":      acc.Wait,
		"Test without Post":      func() error { _, err := acc.Test(); return err },
		"Put outside an epoch":   func() error { return acc.Put([]int64{1}, 0, 0) },
	} {
		if err := f(); !errors.Is(err, mpi.ErrRMASync) {
			return fmt.Errorf("%s: %v, want ErrRMASync", name, err)
		}
	}
	self, _ := wg.Incl([]int{me})
	if err := acc.Post(self); err != nil {
		return err
	}
	if err := acc.Post(self); !errors.Is(err, mpi.ErrRMASync) {
		return fmt.Errorf("Post twice: %v, want ErrRMASync", err)
	}
	if err := acc.Start(self); err != nil {
		return err
	}
	if err := acc.Lock(mpi.LockShared, me); !errors.Is(err, mpi.ErrRMASync) {
		return fmt.Errorf("Lock inside a Start epoch: %v, want ErrRMASync", err)
	}
	if err := acc.Free(); !errors.Is(err, mpi.ErrRMASync) {
		return fmt.Errorf("Free with epochs open: %v, want ErrRMASync", err)
	}
	if done, err := acc.Test(); done || err != nil {
		// Complete has not been called: the epoch cannot be over.
		return fmt.Errorf("Test before this rank's own Complete: %v, %v; want false, nil", done, err)
	}
	if err := firstError(acc.Put([]int64{7}, me, 1), acc.Complete(), acc.Wait()); err != nil {
		return err
	}
	if got := acc.Local()[1]; got != 7 {
		return fmt.Errorf("Put to itself in a PSCW epoch: %d, want 7", got)
	}
	// A group with a process outside the window's communicator.
	if n > 1 {
		sub, err := w.Split(me%2, me)
		if err != nil {
			return err
		}
		sw, err := mpi.WinAllocate[int64](sub, 1)
		if err != nil {
			return err
		}
		if err := sw.Start(wg); !errors.Is(err, mpi.ErrGroup) {
			return fmt.Errorf("Start with a group beyond the window: %v, want ErrGroup", err)
		}
		if err := firstError(sw.Free(), sub.Free()); err != nil {
			return err
		}
	}
	return firstError(acc.Free(), mpi.Barrier(w))
}

func TestWinPSCW(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "win-pscw"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "win-pscw", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}
