package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Request-based one-sided operations (Rput, Rget, Raccumulate,
// RgetAccumulate), issue 16: inside one LockAll epoch every rank reads its
// right neighbour's constant region, writes into its right neighbour's
// landing region, adds into rank 0's sum region and takes tickets from a
// counter at the last rank, all through Requests completed by Wait,
// Waitall and Test loops (some only after UnlockAll); then every result
// against a sequential computation, for short (eager) and long
// (rendezvous) regions.

func init() { rankCases["win-req"] = caseWinReq }

// reqInit is the constant region's element i at rank r.
func reqInit(r, i int) float64 { return float64(r*1_000_003+i) / 4 }

func caseWinReq(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	right, left := (me+1)%n, (me-1+n)%n
	for _, k := range []int{5, 40_000} {
		// Regions: [0,k) constant, [k,2k) landing, [2k,3k) sums, 3k the
		// ticket counter.
		buf := make([]float64, 3*k+1)
		for i := range k {
			buf[i] = reqInit(me, i)
		}
		win, err := mpi.WinCreate(w, buf)
		if err != nil {
			return err
		}
		if err := mpi.Barrier(w); err != nil {
			return err
		}
		if err := win.LockAll(); err != nil {
			return err
		}
		got := make([]float64, k)
		rg, err := win.Rget(got, right, 0)
		if err != nil {
			return fmt.Errorf("k=%d: Rget: %w", k, err)
		}
		out := make([]float64, k)
		add := make([]float64, k)
		for i := range k {
			out[i] = float64(me*k + i)
			add[i] = float64((me + 1) * (i + 1))
		}
		rp, err := win.Rput(out, right, k)
		if err != nil {
			return fmt.Errorf("k=%d: Rput: %w", k, err)
		}
		ra, err := win.Raccumulate(add, 0, 2*k, mpi.Sum)
		if err != nil {
			return fmt.Errorf("k=%d: Raccumulate: %w", k, err)
		}
		ticket := make([]float64, 1)
		rt, err := win.RgetAccumulate([]float64{1}, ticket, n-1, 3*k, mpi.Sum)
		if err != nil {
			return fmt.Errorf("k=%d: RgetAccumulate: %w", k, err)
		}
		// Rget is complete once its Request is: its data is in place
		// before any Flush or Unlock.
		for {
			done, _, err := rg.Test()
			if err != nil {
				return fmt.Errorf("k=%d: Rget's Test: %w", k, err)
			}
			if done {
				break
			}
		}
		for i := range k {
			if want := reqInit(right, i); got[i] != want {
				return fmt.Errorf("k=%d: Rget from %d: element %d = %v, want %v", k, right, i, got[i], want)
			}
		}
		if _, err := mpi.Waitall([]*mpi.Request{rp, rt}); err != nil {
			return fmt.Errorf("k=%d: Waitall of Rput and RgetAccumulate: %w", k, err)
		}
		// The accumulate's Request is completed only after UnlockAll
		// (which completes its operation): it stays valid.
		if err := win.UnlockAll(); err != nil {
			return err
		}
		if _, err := ra.Wait(); err != nil {
			return fmt.Errorf("k=%d: Raccumulate's Wait after UnlockAll: %w", k, err)
		}
		if _, err := ra.Wait(); err != nil {
			return fmt.Errorf("k=%d: second Wait: %w", k, err)
		}
		tickets := make([]float64, n)
		if err := mpi.Allgather(w, ticket, tickets); err != nil {
			return err
		}
		seen := make([]bool, n)
		for r, t := range tickets {
			if t < 0 || int(t) >= n || t != float64(int(t)) || seen[int(t)] {
				return fmt.Errorf("k=%d: tickets %v (rank %d's is wrong): want each of 0..%d once", k, tickets, r, n-1)
			}
			seen[int(t)] = true
		}
		if err := firstError(mpi.Barrier(w), win.Sync()); err != nil {
			return err
		}
		for i := range k {
			if want := float64(left*k + i); buf[k+i] != want {
				return fmt.Errorf("k=%d: landing element %d = %v, want %v from rank %d", k, i, buf[k+i], want, left)
			}
		}
		if me == 0 {
			for i := range k {
				if want := float64(n * (n + 1) / 2 * (i + 1)); buf[2*k+i] != want {
					return fmt.Errorf("k=%d: sum element %d = %v, want %v", k, i, buf[2*k+i], want)
				}
			}
		}
		if me == n-1 && buf[3*k] != float64(n) {
			return fmt.Errorf("k=%d: ticket counter %v, want %d", k, buf[3*k], n)
		}
		if err := win.Free(); err != nil {
			return err
		}
	}

	// Misuse and edge cases, all local.
	win, err := mpi.WinAllocate[int32](w, 4)
	if err != nil {
		return err
	}
	if _, err := win.Rput([]int32{1}, me, 0); !errors.Is(err, mpi.ErrRMASync) {
		return fmt.Errorf("Rput outside an epoch: %v, want ErrRMASync", err)
	}
	if err := win.Fence(); err != nil {
		return err
	}
	if _, err := win.Rget(make([]int32, 1), me, 0); !errors.Is(err, mpi.ErrRMASync) {
		return fmt.Errorf("Rget in a fence epoch: %v, want ErrRMASync", err)
	}
	if err := win.Fence(); err != nil {
		return err
	}
	if err := win.Lock(mpi.LockExclusive, me); err != nil {
		return err
	}
	if _, err := win.Rput(make([]int32, 5), me, 0); !errors.Is(err, mpi.ErrRMARange) {
		return fmt.Errorf("Rput past the window: %v, want ErrRMARange", err)
	}
	q, err := win.Rput([]int32{1}, mpi.ProcNull, 0)
	if err != nil {
		return err
	}
	if done, st, err := q.Test(); !done || err != nil || st.Source != mpi.ProcNull {
		return fmt.Errorf("Rput to ProcNull: Test = %v, %+v, %v; want complete at once", done, st, err)
	}
	q, err = win.Rget(nil, me, 4) // no elements, at the end: complete at once
	if err != nil {
		return err
	}
	if done, _, err := q.Test(); !done || err != nil {
		return fmt.Errorf("empty Rget: Test = %v, %v; want complete at once", done, err)
	}
	if _, err := win.RgetAccumulate([]int32{1, 2}, make([]int32, 1), me, 0, mpi.Sum); !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("RgetAccumulate with mismatched lengths: %v, want ErrCount", err)
	}
	if _, err := win.Raccumulate([]int32{1}, me, 0, mpi.NoOp); !errors.Is(err, mpi.ErrOp) {
		return fmt.Errorf("Raccumulate with NoOp: %v, want ErrOp", err)
	}
	if err := win.Unlock(me); err != nil {
		return err
	}
	return firstError(win.Free(), mpi.Barrier(w))
}

func TestWinRequests(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "win-req"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "win-req", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
	t.Run("messages/np=3", func(t *testing.T) { job{np: 3, cas: "win-req", env: []string{"GORUN_RMA_DIRECT=0"}}.ok(t) })
}
