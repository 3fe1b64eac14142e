package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Persistent collectives on an intercommunicator (issue 16): Allreduce,
// Bcast from each group, Alltoall and ReduceScatterBlock on the even/odd
// intercommunicator, each request run three times with new inputs, the
// even ranks starting them in one order and the odd ranks in the reverse
// (MPI-4 allows it), every result against a sequential computation from
// world ranks; and Alltoallw on it.

func init() { rankCases["intercoll-persistent"] = caseInterPersistent }

func caseInterPersistent(w *mpi.Comm) error {
	rank := w.Rank()
	color := rank % 2
	local, inter, err := evenOdd(w)
	if err != nil {
		return err
	}
	me, rsize := local.Rank(), inter.RemoteSize()
	remote := func(j int) int { return 2*j + 1 - color }
	const k = 3

	arIn, arOut := make([]int64, k), make([]int64, k)
	bc := make([]int64, k)
	aaIn, aaOut := make([]int64, rsize), make([]int64, rsize)
	// ReduceScatterBlock: both groups' vectors must have one length, here
	// lsize*rsize, each process getting rsize elements.
	rsIn, rsOut := make([]int64, local.Size()*rsize), make([]int64, rsize)
	bcastRoot := 0 // group 0's first rank broadcasts to group 1
	root := mpi.ProcNull
	switch {
	case color == 1:
		root = 0
	case me == bcastRoot:
		root = mpi.Root
	}
	var reqs []*mpi.Request
	for _, mk := range []func() (*mpi.Request, error){
		func() (*mpi.Request, error) { return mpi.AllreduceInit(inter, arIn, arOut, mpi.Sum) },
		func() (*mpi.Request, error) { return mpi.BcastInit(inter, bc, root) },
		func() (*mpi.Request, error) { return mpi.AlltoallInit(inter, aaIn, aaOut) },
		func() (*mpi.Request, error) { return mpi.ReduceScatterBlockInit(inter, rsIn, rsOut, mpi.Sum) },
	} {
		q, err := mk()
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
	}
	order := slices.Clone(reqs)
	if color == 1 {
		slices.Reverse(order)
	}
	for run := range 3 {
		v := func(r, i int) int64 { return int64(run*10000 + r*100 + i) }
		for i := range k {
			arIn[i] = v(rank, i)
			bc[i] = -1
			if root == mpi.Root {
				bc[i] = v(rank, i)
			}
		}
		for j := range rsize {
			aaIn[j] = v(rank, j)
		}
		for j := range rsIn {
			rsIn[j] = v(rank, j)
		}
		for _, q := range order {
			if err := q.Start(); err != nil {
				return fmt.Errorf("run %d: Start: %w", run, err)
			}
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		for i := range k {
			var sum int64
			for j := range rsize {
				sum += v(remote(j), i)
			}
			if arOut[i] != sum {
				return fmt.Errorf("run %d: Allreduce element %d = %d, want %d", run, i, arOut[i], sum)
			}
			if color == 1 && bc[i] != v(bcastRoot*2, i) {
				return fmt.Errorf("run %d: Bcast element %d = %d, want %d", run, i, bc[i], v(bcastRoot*2, i))
			}
		}
		for j := range rsize {
			if want := v(remote(j), me); aaOut[j] != want {
				return fmt.Errorf("run %d: Alltoall from remote %d = %d, want %d", run, j, aaOut[j], want)
			}
		}
		for i := range rsize {
			var want int64
			for j := range rsize {
				want += v(remote(j), me*rsize+i)
			}
			if rsOut[i] != want {
				return fmt.Errorf("run %d: ReduceScatterBlock element %d = %d, want %d", run, i, rsOut[i], want)
			}
		}
	}
	for _, q := range reqs {
		if err := q.Free(); err != nil {
			return err
		}
	}
	// Alltoallw: the odd elements of sendbuf, one per remote process, into
	// every third element of recvbuf.
	wsend, wrecv := make([]int64, 2*rsize), make([]int64, 3*rsize)
	send, recv := make([]mpi.Layout, rsize), make([]mpi.Layout, rsize)
	for j := range rsize {
		wsend[2*j], wsend[2*j+1] = -7, int64(rank*100+j)
		send[j] = mpi.Indexed([]int{1}, []int{2*j + 1})
		recv[j] = mpi.IndexedBlock(1, []int{3 * j})
	}
	for i := range wrecv {
		wrecv[i] = -1
	}
	if err := mpi.Alltoallw(inter, wsend, send, wrecv, recv); err != nil {
		return fmt.Errorf("Alltoallw: %w", err)
	}
	for j := range rsize {
		if got := wrecv[3*j : 3*j+3]; got[0] != int64(remote(j)*100+me) || got[1] != -1 || got[2] != -1 {
			return fmt.Errorf("Alltoallw from remote %d: %v, want [%d -1 -1]", j, got, remote(j)*100+me)
		}
	}
	if err := mpi.Alltoallw(inter, wrecv, recv, wrecv, recv); !errors.Is(err, mpi.ErrBuffer) {
		return fmt.Errorf("Alltoallw in place on an intercommunicator: %v, want ErrBuffer", err)
	}
	if _, err := mpi.ExscanInit(inter, arIn, arOut, mpi.Sum); !errors.Is(err, mpi.ErrComm) {
		return fmt.Errorf("ExscanInit on an intercommunicator: %v, want ErrComm", err)
	}
	return mpi.Barrier(w)
}

func TestInterPersistent(t *testing.T) {
	for _, np := range []int{2, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "intercoll-persistent"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "intercoll-persistent", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}
