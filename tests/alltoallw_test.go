package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["alltoallw"] = caseAlltoallw }

// caseAlltoallw: a distributed transpose with Alltoallw (column r of each
// rank's rows×n grid to rank r, received as row s of an n×rows grid), the
// same in place on a square grid, a halo exchange with NeighborAlltoallw
// on periodic and non-periodic rings, and the errors.
func caseAlltoallw(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	val := func(rank, i, j int) int64 { return int64(rank*10000 + i*100 + j) }
	const rows = 3
	grid := make([]int64, rows*n)
	for i := range rows {
		for j := range n {
			grid[i*n+j] = val(me, i, j)
		}
	}
	send, recv := make([]mpi.Layout, n), make([]mpi.Layout, n)
	for r := range n {
		send[r] = mpi.Subarray([]int{rows, n}, []int{rows, 1}, []int{0, r}, mpi.OrderC)
		recv[r] = mpi.Subarray([]int{n, rows}, []int{1, rows}, []int{r, 0}, mpi.OrderC)
	}
	out := make([]int64, n*rows)
	if err := mpi.Alltoallw(w, grid, send, out, recv); err != nil {
		return fmt.Errorf("Alltoallw: %w", err)
	}
	for s := range n {
		for i := range rows {
			if got, want := out[s*rows+i], val(s, i, me); got != want {
				return fmt.Errorf("Alltoallw: row %d element %d is %d, want %d (rank %d's column %d)", s, i, got, want, s, me)
			}
		}
	}

	// In place: a square n×n grid, column r out, row r in, one slice.
	sq := make([]int64, n*n)
	for i := range n {
		for j := range n {
			sq[i*n+j] = val(me, i, j)
		}
	}
	col, row := make([]mpi.Layout, n), make([]mpi.Layout, n)
	for r := range n {
		col[r] = mpi.Subarray([]int{n, n}, []int{n, 1}, []int{0, r}, mpi.OrderC)
		row[r] = mpi.Subarray([]int{n, n}, []int{1, n}, []int{r, 0}, mpi.OrderC)
	}
	if err := mpi.Alltoallw(w, sq, col, sq, row); err != nil {
		return fmt.Errorf("Alltoallw in place: %w", err)
	}
	for s := range n {
		for i := range n {
			if got, want := sq[s*n+i], val(s, i, me); got != want {
				return fmt.Errorf("Alltoallw in place: row %d element %d is %d, want %d", s, i, got, want)
			}
		}
	}

	// Halo exchange on a ring: the first and last interior elements out,
	// the ghosts in; past the ends of a non-periodic ring nothing moves.
	const m = 5
	for _, periodic := range []bool{true, false} {
		ring, err := mpi.CartCreate(w, []int{n}, []bool{periodic}, false)
		if err != nil {
			return err
		}
		buf := make([]int64, m+2)
		for j := range buf {
			buf[j] = val(me, 0, j)
		}
		buf[0], buf[m+1] = unset, unset
		out := []mpi.Layout{mpi.IndexedBlock(1, []int{1}), mpi.IndexedBlock(1, []int{m})}
		in := []mpi.Layout{mpi.IndexedBlock(1, []int{0}), mpi.IndexedBlock(1, []int{m + 1})}
		if err := mpi.NeighborAlltoallw(ring, buf, out, buf, in); err != nil {
			return fmt.Errorf("NeighborAlltoallw periodic %v: %w", periodic, err)
		}
		left, right, err := ring.CartShift(0, 1)
		if err != nil {
			return err
		}
		wantL, wantR := int64(unset), int64(unset)
		if left >= 0 {
			wantL = val(left, 0, m)
		}
		if right >= 0 {
			wantR = val(right, 0, 1)
		}
		if buf[0] != wantL || buf[m+1] != wantR {
			return fmt.Errorf("NeighborAlltoallw periodic %v: ghosts %d %d, want %d %d (neighbours %d %d)", periodic, buf[0], buf[m+1], wantL, wantR, left, right)
		}
		// Errors: a layout missing at rank 0 fails the call there and at
		// its neighbours (a rank that exchanges nothing with it may finish).
		bad := in
		if me == 0 {
			bad = in[:1]
		}
		err = mpi.NeighborAlltoallw(ring, buf, out, buf, bad)
		nextTo0 := me == 1 || periodic && me == n-1
		if me == 0 && !errors.Is(err, mpi.ErrArg) || nextTo0 && err == nil {
			return fmt.Errorf("NeighborAlltoallw with a layout missing at rank 0: %v", err)
		}
		if err := ring.Free(); err != nil {
			return err
		}
	}
	// A layout past the end of the buffer.
	send[n-1] = mpi.IndexedBlock(1, []int{len(grid)})
	if err := mpi.Alltoallw(w, grid, send, out, recv); !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("Alltoallw with a layout outside the buffer: %v", err)
	}
	return nil
}

// TestAlltoallw runs caseAlltoallw at np 3 and 4 over sm, and at np 3 over
// tcp.
func TestAlltoallw(t *testing.T) {
	for _, np := range []int{3, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "alltoallw"}.ok(t) })
	}
	t.Run("tcp", func(t *testing.T) { job{np: 3, cas: "alltoallw", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}
