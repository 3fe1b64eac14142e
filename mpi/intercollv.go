package mpi

import "github.com/gorun/gorun/coll"

// The v forms and Reduce_scatter on an intercommunicator (intercoll.go
// says how they run). Counts and displacements describe the remote
// group's blocks, except ReduceScatter's recvcounts, which describe how
// the local group shares the result (MPI-3.1 §5.10). None has an in-place
// form on an intercommunicator: overlapping buffers fail with ErrBuffer.

// interGatherv: the root (Root) receives remote process j's sendbuf,
// counts[j] elements, at displs[j] of recvbuf (counts and displs of
// RemoteSize entries, significant at the root only).
func interGatherv[T Element](name string, c *Comm, sendbuf, recvbuf []T, counts, displs []int, root int) interCall {
	r, err := c.interRoot(name, root)
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf), Root: r}
	if err == nil && root == Root {
		a.Counts, a.Displs, err = layout(name, "receive", c.RemoteSize(), counts, displs, len(recvbuf), elemSize[T]())
	}
	return c.interPrep(name, coll.InterGatherv, a, err)
}

// interScatterv: the root (Root) sends counts[j] elements at displs[j] of
// sendbuf to remote process j, whose recvbuf must be exactly that long.
func interScatterv[T Element](name string, c *Comm, sendbuf []T, counts, displs []int, recvbuf []T, root int) interCall {
	r, err := c.interRoot(name, root)
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf), Root: r}
	if err == nil && root == Root {
		a.Counts, a.Displs, err = layout(name, "send", c.RemoteSize(), counts, displs, len(sendbuf), elemSize[T]())
	}
	return c.interPrep(name, coll.InterScatterv, a, err)
}

// interAllgatherv: every process receives remote process j's sendbuf,
// counts[j] elements, at displs[j] of recvbuf (the same counts and displs
// at every process of a group).
func interAllgatherv[T Element](name string, c *Comm, sendbuf, recvbuf []T, counts, displs []int) interCall {
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	var err error
	a.Counts, a.Displs, err = layout(name, "receive", c.RemoteSize(), counts, displs, len(recvbuf), elemSize[T]())
	if err == nil {
		err = interDisjoint(name, sendbuf, recvbuf)
	}
	return c.interPrep(name, coll.InterAllgatherv, a, err)
}

// interAlltoallv: every process sends sendcounts[j] elements at sdispls[j]
// of sendbuf to remote process j and receives recvcounts[j] elements from
// it at rdispls[j] of recvbuf (all of RemoteSize entries).
func interAlltoallv[T Element](name string, c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) interCall {
	m, es := c.RemoteSize(), elemSize[T]()
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	var err error
	a.Counts, a.Displs, err = layout(name, "receive", m, recvcounts, rdispls, len(recvbuf), es)
	if err == nil {
		a.SendCounts, a.SendDispls, err = layout(name, "send", m, sendcounts, sdispls, len(sendbuf), es)
	}
	if err == nil {
		err = interDisjoint(name, sendbuf, recvbuf)
	}
	return c.interPrep(name, coll.InterAlltoallv, a, err)
}

// interReduceScatter: every process receives in recvbuf its block,
// recvcounts[rank] elements (recvcounts has Size entries, the same at
// every process of a group), of the reduction of the remote group's
// sendbufs; both groups' sendbufs hold the sum of their group's
// recvcounts, which must be equal.
func interReduceScatter[T Element](name string, c *Comm, sendbuf, recvbuf []T, recvcounts []int, op Op) interCall {
	o, err := bind[T](name, op)
	es := elemSize[T]()
	a := coll.Args{Op: o, Elem: es}
	if err == nil {
		var total int
		a.Counts, total, err = scatterCounts(name, c.Size(), recvcounts, es)
		switch {
		case err != nil:
		case len(sendbuf) < total:
			err = errorf(ErrCount, name, "send buffer of %d elements for %d", len(sendbuf), total)
		case len(recvbuf) < recvcounts[c.rank]:
			err = errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), recvcounts[c.rank])
		default:
			a.Send, a.Recv = elemBytes(sendbuf[:total]), elemBytes(recvbuf[:recvcounts[c.rank]])
			err = interDisjoint(name, sendbuf[:total], recvbuf[:recvcounts[c.rank]])
		}
	}
	return c.interPrep(name, coll.InterReduceScatter, a, err)
}

// interReduceScatterBlock: interReduceScatter with Size blocks of
// len(sendbuf)/Size elements; both groups' sendbufs have one length.
func interReduceScatterBlock[T Element](name string, c *Comm, sendbuf, recvbuf []T, op Op) interCall {
	n := c.Size()
	if len(sendbuf)%n != 0 {
		err := errorf(ErrCount, name, "send buffer of %d elements is not %d equal blocks", len(sendbuf), n)
		return c.interPrep(name, coll.InterReduceScatter, coll.Args{}, err)
	}
	counts := make([]int, n)
	for r := range counts {
		counts[r] = len(sendbuf) / n
	}
	return interReduceScatter(name, c, sendbuf, recvbuf, counts, op)
}
