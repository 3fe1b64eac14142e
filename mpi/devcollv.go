package mpi

import (
	"github.com/gorun/gorun/coll"
	"github.com/gorun/gorun/gpu"
)

// The v forms and the scans on device memory, with the rules of
// devcoll.go. Counts and displacements are in elements of the buffers, as
// for the host v forms, and are checked the same way (layout). In place:
// the zero gpu.Buffer, the whole other buffer, or exactly this rank's
// block of it, as the send buffer (AllgathervGPU, GathervGPU at the root)
// or the receive buffer (ScattervGPU at the root); for the scans, the zero
// buffer or the receive buffer itself as the send buffer. AlltoallvGPU
// does not work in place, as AlltoallGPU.

// sameRange reports whether a and b are the same bytes of one device.
func sameRange(a, b gpu.Buffer) bool {
	return a.Ptr() == b.Ptr() && a.Len() == b.Len() && a.Device() == b.Device()
}

// inPlaceAt reports whether b means "in place" for the block of k
// elements at off of whole (checked to lie inside it): the zero buffer,
// whole itself, or exactly that block.
func inPlaceAt(b, whole gpu.Buffer, off, k int) bool {
	return isZeroBuf(b) || sameRange(b, whole) || sameRange(b, whole.Slice(off, off+k))
}

// AllgathervGPU collects every rank's sendbuf into every rank's recvbuf,
// rank r's counts[r] elements at displs[r] (the same counts and displs at
// every rank; MPI_Allgatherv on device memory). sendbuf must hold
// counts[r] elements at rank r, unless in place.
func AllgathervGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, counts, displs []int) error {
	return devCollective(c, "AllgathervGPU", coll.AllgathervGPU, allgathervGPU(c, "AllgathervGPU", sendbuf, recvbuf, counts, displs))
}

func allgathervGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer, counts, displs []int) devPrep {
	return func() (coll.Args, error) {
		if err := checkDev(name, recvbuf); err != nil {
			return coll.Args{}, err
		}
		me, elem := c.Rank(), elemOf(recvbuf)
		bc, bd, err := layout(name, "receive", c.Size(), counts, displs, recvbuf.Count(), elem)
		if err != nil {
			return coll.Args{}, err
		}
		a := coll.Args{RecvD: recvbuf, Elem: elem, Counts: bc, Displs: bd}
		if inPlaceAt(sendbuf, recvbuf, displs[me], counts[me]) {
			return a, nil
		}
		if err := checkDev(name, sendbuf, recvbuf); err != nil {
			return coll.Args{}, err
		}
		if sendbuf.Count() != counts[me] {
			return coll.Args{}, errorf(ErrCount, name, "rank %d sends %d elements where counts[%d] is %d", me, sendbuf.Count(), me, counts[me])
		}
		a.SendD = sendbuf
		return a, nil
	}
}

// GathervGPU collects every rank's sendbuf into the root's recvbuf, rank
// r's counts[r] elements at displs[r] (MPI_Gatherv on device memory);
// recvbuf, counts and displs are read at the root only.
func GathervGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, counts, displs []int, root int) error {
	return devCollective(c, "GathervGPU", coll.GathervGPU, rootedvGPU(c, "GathervGPU", sendbuf, recvbuf, counts, displs, root, true))
}

// ScattervGPU sends counts[r] elements at displs[r] of the root's sendbuf
// to rank r's recvbuf (MPI_Scatterv on device memory); sendbuf, counts
// and displs are read at the root only. The root's recvbuf must hold
// counts[root] elements, unless in place.
func ScattervGPU(c *Comm, sendbuf gpu.Buffer, counts, displs []int, recvbuf gpu.Buffer, root int) error {
	return devCollective(c, "ScattervGPU", coll.ScattervGPU, rootedvGPU(c, "ScattervGPU", sendbuf, recvbuf, counts, displs, root, false))
}

// rootedvGPU prepares GathervGPU (gather) or ScattervGPU.
func rootedvGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer, counts, displs []int, root int, gather bool) devPrep {
	return func() (coll.Args, error) {
		if err := c.checkRoot(name, root); err != nil {
			return coll.Args{}, err
		}
		// whole is the root's buffer of every block, one a rank's block.
		whole, one := recvbuf, sendbuf
		if !gather {
			whole, one = sendbuf, recvbuf
		}
		a := coll.Args{Root: root}
		set := func(whole, one gpu.Buffer) {
			if gather {
				a.SendD, a.RecvD = one, whole
			} else {
				a.SendD, a.RecvD = whole, one
			}
		}
		if c.Rank() != root {
			a.Elem = elemOf(one)
			set(gpu.Buffer{}, one)
			return a, checkDev(name, one)
		}
		if err := checkDev(name, whole); err != nil {
			return coll.Args{}, err
		}
		what := "receive"
		if !gather {
			what = "send"
		}
		a.Elem = elemOf(whole)
		var err error
		if a.Counts, a.Displs, err = layout(name, what, c.Size(), counts, displs, whole.Count(), a.Elem); err != nil {
			return coll.Args{}, err
		}
		if inPlaceAt(one, whole, displs[root], counts[root]) {
			set(whole, gpu.Buffer{})
			return a, nil
		}
		if err := checkDev(name, whole, one); err != nil {
			return coll.Args{}, err
		}
		if one.Count() != counts[root] {
			return coll.Args{}, errorf(ErrCount, name, "the root's own block has %d elements where counts[%d] is %d", one.Count(), root, counts[root])
		}
		set(whole, one)
		return a, nil
	}
}

// AlltoallvGPU sends sendcounts[r] elements at sdispls[r] of sendbuf to
// rank r and receives recvcounts[r] elements from rank r at rdispls[r] of
// recvbuf (MPI_Alltoallv on device memory). In place (the zero gpu.Buffer
// or recvbuf itself as sendbuf) the send counts and displacements are
// ignored: recvbuf holds the blocks to send at the receive layout, and
// receives in their place (the call copies it to device scratch first).
func AlltoallvGPU(c *Comm, sendbuf gpu.Buffer, sendcounts, sdispls []int, recvbuf gpu.Buffer, recvcounts, rdispls []int) error {
	return devCollective(c, "AlltoallvGPU", coll.AlltoallvGPU, alltoallvGPU(c, "AlltoallvGPU", sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls))
}

func alltoallvGPU(c *Comm, name string, sendbuf gpu.Buffer, sendcounts, sdispls []int, recvbuf gpu.Buffer, recvcounts, rdispls []int) devPrep {
	return func() (coll.Args, error) {
		if err := checkDev(name, sendbuf, recvbuf); err != nil {
			return coll.Args{}, err
		}
		n, me, elem := c.Size(), c.Rank(), elemOf(recvbuf, sendbuf)
		a := coll.Args{SendD: sendbuf, RecvD: recvbuf, Elem: elem}
		var err error
		if a.Counts, a.Displs, err = layout(name, "receive", n, recvcounts, rdispls, recvbuf.Count(), elem); err != nil {
			return coll.Args{}, err
		}
		if inPlaceGPU(sendbuf, recvbuf) {
			a.SendD, a.SendCounts, a.SendDispls = gpu.Buffer{}, a.Counts, a.Displs
			return a, nil
		}
		if a.SendCounts, a.SendDispls, err = layout(name, "send", n, sendcounts, sdispls, sendbuf.Count(), elem); err != nil {
			return coll.Args{}, err
		}
		if sendcounts[me] != recvcounts[me] {
			return coll.Args{}, errorf(ErrCount, name, "rank %d sends itself %d elements but receives %d", me, sendcounts[me], recvcounts[me])
		}
		return a, nil
	}
}

// ScanGPU leaves sendbuf(0) op ... op sendbuf(r) in rank r's recvbuf
// (MPI_Scan on device memory), reduced in rank order. The count is
// sendbuf's; in place, recvbuf's.
func ScanGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) error {
	return devCollective(c, "ScanGPU", coll.ScanGPU, scanGPU("ScanGPU", sendbuf, recvbuf, op))
}

// ExscanGPU leaves sendbuf(0) op ... op sendbuf(r-1) in rank r's recvbuf
// (MPI_Exscan on device memory); rank 0's recvbuf is not written.
func ExscanGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) error {
	return devCollective(c, "ExscanGPU", coll.ExscanGPU, scanGPU("ExscanGPU", sendbuf, recvbuf, op))
}

func scanGPU(name string, sendbuf, recvbuf gpu.Buffer, op Op) devPrep {
	return func() (coll.Args, error) { return reductionGPU(name, sendbuf, recvbuf, op, coll.Args{}, true) }
}
