package mpi_test

import (
	"fmt"

	"github.com/gorun/gorun/mpi"
)

func ExampleWinCreate() {
	w := mpi.World()
	// Every rank exposes four counters; here the job is one rank, which
	// is its own target (any rank may be: next := (w.Rank()+1)%w.Size()).
	win, _ := mpi.WinCreate(w, make([]int64, 4))
	next := (w.Rank() + 1) % w.Size()

	// Active target: operations between two Fences.
	win.Fence()
	win.Put([]int64{7, 8}, next, 0)
	win.Fence()

	// Passive target: the target need not call anything.
	win.Lock(mpi.LockExclusive, next)
	win.Accumulate([]int64{1, 1}, next, 1, mpi.Sum)
	var old int64
	win.FetchAndOp(100, &old, next, 3, mpi.Sum)
	win.Unlock(next)

	got := make([]int64, 4)
	win.Lock(mpi.LockShared, next)
	win.Get(got, next, 0)
	win.Unlock(next)
	fmt.Println(got, old)
	win.Free()
	// Output: [7 9 1 100] 0
}
