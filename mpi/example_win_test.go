package mpi_test

import (
	"errors"
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

func ExampleWinAllocateShared() {
	w := mpi.World()
	// Ranks that share a host (all of them here: split the world with
	// SplitType(SplitShared) where the job spans hosts) allocate their parts
	// of one shared segment, then address each other's parts directly.
	node, _ := w.SplitType(mpi.SplitShared, 0)
	win, _ := mpi.WinAllocateShared[float64](node, 3)
	mine := win.Local()
	for i := range mine {
		mine[i] = float64(10*node.Rank() + i)
	}
	// Stores, then the window's synchronization and a barrier.
	win.Sync()
	mpi.Barrier(node)
	win.Sync()
	first, _ := win.SharedQuery(0)
	fmt.Println(first)
	win.Free()
	node.Free()
	// Output: [0 1 2]
}

func ExampleWinCreateDynamic() {
	w := mpi.World()
	win, _ := mpi.WinCreateDynamic[int64](w)
	// Memory comes and goes without collective calls: attach a slice and
	// tell the others its displacement (here the job is one rank).
	node := []int64{0, 0, 0}
	disp, _ := win.Attach(node)
	disps := make([]int64, w.Size())
	mpi.Allgather(w, []int64{int64(disp)}, disps)

	target := 0
	win.Lock(mpi.LockExclusive, target)
	win.Put([]int64{5, 6}, target, int(disps[target])+1)
	win.Unlock(target)

	// Past the slice's end: the target refuses, the origin learns it.
	win.Lock(mpi.LockShared, target)
	win.Put([]int64{9}, target, int(disps[target])+3)
	err := win.Unlock(target)
	fmt.Println(node, errors.Is(err, mpi.ErrRMARange))
	win.Detach(node)
	win.Free()
	// Output: [0 5 6] true
}

func ExampleWin_Rget() {
	w := mpi.World()
	win, _ := mpi.WinCreate(w, []float64{1.5, 2.5, 3.5})
	win.LockAll()
	got := make([]float64, 2)
	q, _ := win.Rget(got, 0, 1)
	q.Wait() // got is in place now, before UnlockAll
	fmt.Println(got)
	win.UnlockAll()
	win.Free()
	// Output: [2.5 3.5]
}
