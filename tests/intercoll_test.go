package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Reduce, Gather, Scatter and Alltoall on an intercommunicator (issue 16),
// between the even and the odd world ranks (groups of different sizes at
// odd np): the root is in one group and the other group contributes or
// receives; every result against a sequential computation from world
// ranks.

func init() { rankCases["intercoll"] = caseIntercoll }

// interRootArg is the root argument of a rooted intercommunicator
// collective whose root is local rank lr of group rootColor.
func interRootArg(color, localRank, rootColor, lr int) int {
	switch {
	case color != rootColor:
		return lr
	case localRank == lr:
		return mpi.Root
	}
	return mpi.ProcNull
}

func caseIntercoll(w *mpi.Comm) error {
	rank, n := w.Rank(), w.Size()
	color := rank % 2
	local, inter, err := evenOdd(w)
	if err != nil {
		return err
	}
	me, rsize := local.Rank(), inter.RemoteSize()
	// The world rank of remote rank j, and of local rank j.
	remote := func(j int) int { return 2*j + 1 - color }
	size := func(c int) int { return (n + 1 - c) / 2 } // group c's size
	const k = 1000                                     // elements per process

	for _, rootColor := range []int{0, 1} {
		lr := size(rootColor) - 1 // the root: the group's last rank
		root := interRootArg(color, me, rootColor, lr)
		isRoot := root == mpi.Root

		// Reduce: the root gets the sum over the other group of each
		// process's vector (world rank r contributes r*k + i).
		send := make([]int64, k)
		for i := range send {
			send[i] = int64(rank*k + i)
		}
		var recv []int64
		if isRoot {
			recv = make([]int64, k)
		}
		if err := mpi.Reduce(inter, send, recv, mpi.Sum, root); err != nil {
			return fmt.Errorf("Reduce, root in group %d: %w", rootColor, err)
		}
		if isRoot {
			for i, v := range recv {
				var want int64
				for j := range rsize {
					want += int64(remote(j)*k + i)
				}
				if v != want {
					return fmt.Errorf("Reduce, root in group %d: element %d = %d, want %d", rootColor, i, v, want)
				}
			}
		}

		// Gather: the root gets every remote process's block in its
		// rank order.
		if isRoot {
			recv = make([]int64, rsize*k)
		}
		if err := mpi.Gather(inter, send, recv, root); err != nil {
			return fmt.Errorf("Gather, root in group %d: %w", rootColor, err)
		}
		if isRoot {
			for j := range rsize {
				for i := range k {
					if want := int64(remote(j)*k + i); recv[j*k+i] != want {
						return fmt.Errorf("Gather, root in group %d: block %d element %d = %d, want %d", rootColor, j, i, recv[j*k+i], want)
					}
				}
			}
		}

		// Scatter: remote process j gets block j of the root's buffer.
		var all []float64
		if isRoot {
			all = make([]float64, rsize*k)
			for i := range all {
				all[i] = float64(rank) + float64(i)/4
			}
		}
		got := make([]float64, k)
		if err := mpi.Scatter(inter, all, got, root); err != nil {
			return fmt.Errorf("Scatter, root in group %d: %w", rootColor, err)
		}
		if color != rootColor {
			rootWorld := 2*lr + rootColor
			for i, v := range got {
				if want := float64(rootWorld) + float64(me*k+i)/4; v != want {
					return fmt.Errorf("Scatter, root in group %d: element %d = %v, want %v", rootColor, i, v, want)
				}
			}
		}
	}

	// Alltoall: block j goes to remote j; blocks of 3 elements.
	const b = 3
	s := make([]int32, rsize*b)
	for j := range rsize {
		for i := range b {
			s[j*b+i] = int32(rank*10000 + remote(j)*10 + i)
		}
	}
	r := make([]int32, rsize*b)
	if err := mpi.Alltoall(inter, s, r); err != nil {
		return fmt.Errorf("Alltoall: %w", err)
	}
	for j := range rsize {
		for i := range b {
			if want := int32(remote(j)*10000 + rank*10 + i); r[j*b+i] != want {
				return fmt.Errorf("Alltoall: block %d element %d = %d, want %d", j, i, r[j*b+i], want)
			}
		}
	}

	// A bad root fails every process (the others through the abort).
	if err := mpi.Reduce(inter, []int64{1}, []int64{0}, mpi.Sum, rsize+3); err == nil {
		return errors.New("Reduce with a root outside the remote group succeeded")
	}
	if err := mpi.Barrier(inter); err != nil {
		return err
	}
	return mpi.Barrier(w)
}

func TestIntercoll(t *testing.T) {
	for _, np := range []int{2, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "intercoll"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "intercoll", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}
