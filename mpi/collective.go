package mpi

import (
	"errors"
	"sync"

	"github.com/gorun/gorun/coll"
)

// Collectives.
//
// Counts come from slice lengths: a rank's contribution is its whole send
// buffer, and receive buffers must be at least as long as the call needs
// (extra elements are left alone). The v forms take counts and
// displacements in elements.
//
// In place (MPI_IN_PLACE) is spelled by aliasing: pass the receive buffer
// itself as the send buffer (Allreduce(c, buf, buf, op); likewise Reduce at
// the root, Alltoall(v), ReduceScatter(Block), Scan, Exscan), or, for
// Gather(v) and Allgather(v), this rank's own block of the receive buffer
// as the send buffer, and for Scatter(v) at the root its own block of the
// send buffer as the receive buffer. Any other overlap of the two buffers
// fails with ErrBuffer.
//
// Every rank of the communicator must make the same collective calls in
// the same order. A rank whose call fails (bad arguments, mismatched
// counts, a dead peer) tells the others, whose pending calls then fail too
// instead of waiting forever; when mismatched counts make the ranks run
// different algorithms, the rank left waiting finds out after
// GORUN_COLL_STALL (2 s) and the call fails with ErrCount everywhere it is
// still pending. Ranks whose part of a failed call did not involve the
// failing rank may complete it normally. The communicator stays usable
// for later calls. Algorithms are chosen per call by a measured table;
// GORUN_COLL_<NAME>=<algorithm> or SetCollAlgorithm force one.

// call is a validated collective call: the algorithm entry point and its
// byte arguments.
type call struct {
	fn   func(*coll.Comm, *coll.Args) error
	args coll.Args
}

// begin checks c and starts a call on it; an error has been through
// c's handler.
func (c *Comm) begin(op string) (coll.Comm, error) {
	if err := c.check(op); err != nil {
		return coll.Comm{}, c.fail(err)
	}
	if err := c.intra(op); err != nil {
		return coll.Comm{}, c.fail(err)
	}
	return c.cc.Begin(), nil
}

// classOf is err's class (ErrOther when it has none).
func classOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ErrOther
}

// wrapColl maps an error of package coll to its class: a call aborted by
// another rank takes the class that rank reported.
func wrapColl(op string, err error) error {
	if err == nil {
		return nil
	}
	var ae *coll.AbortedError
	if errors.As(err, &ae) {
		cl := Class(ae.Class)
		if _, ok := classNames[cl]; !ok {
			cl = ErrOther
		}
		return &Error{Class: cl, Op: op, Err: err}
	}
	if errors.Is(err, coll.ErrCount) {
		return &Error{Class: ErrCount, Op: op, Err: err}
	}
	return wrap(op, err)
}

// running is a call's state while its algorithm runs. The algorithms are
// called through function values, which makes everything they are handed
// escape to the heap; running comes from a pool instead, so that a small
// blocking collective allocates nothing here.
type running struct {
	v    coll.Comm
	args coll.Args
}

var runPool = sync.Pool{New: func() any { return new(running) }}

// finish runs a prepared blocking call (or reports why it could not be
// prepared) and tells the other ranks if it failed. Every blocking call
// comes here, with good arguments or not, and readies the communicator
// first (coll.Comm.Prepare: the shared-memory set-up at its first blocking
// call), so that every rank does that at the same call.
func finish(op string, v *coll.Comm, cl *call, err error) error {
	if perr := v.Prepare(); perr != nil && err == nil {
		err = wrapColl(op, perr)
	}
	if err == nil {
		r := runPool.Get().(*running)
		r.v, r.args = *v, cl.args
		err = wrapColl(op, cl.fn(&r.v, &r.args))
		*r = running{}
		runPool.Put(r)
	}
	if err != nil {
		v.Abort(int(classOf(err)), err)
	}
	return err
}

func (c *Comm) checkRoot(op string, root int) error {
	if root < 0 || root >= len(c.world) {
		return errorf(ErrRoot, op, "root %d is not in %s (size %d)", root, c.name, len(c.world))
	}
	return nil
}

// inPlace reports whether send and recv are the same memory (in place),
// and fails with ErrBuffer when they overlap otherwise.
func inPlace(op string, send, recv []byte) (bool, error) {
	switch aliasing(send, recv) {
	case same:
		return true, nil
	case partial:
		return false, errorf(ErrBuffer, op, "send and receive buffers overlap")
	}
	return false, nil
}

// ownBlock reports whether send is exactly recv[off:off+len(send)] (in
// place for the gather family), and fails with ErrBuffer on any other
// overlap.
func ownBlock(op string, send, recv []byte, off int) (bool, error) {
	if within(send, recv, off) {
		return true, nil
	}
	if aliasing(send, recv) != disjoint {
		return false, errorf(ErrBuffer, op, "send buffer overlaps the receive buffer other than at this rank's block")
	}
	return false, nil
}

// layout checks n counts and displacements (elements) against a buffer of
// size elements and returns them in bytes.
func layout(op, what string, n int, counts, displs []int, size, elem int) ([]int, []int, error) {
	if len(counts) != n || len(displs) != n {
		return nil, nil, errorf(ErrCount, op, "%s: %d counts and %d displacements for %d ranks", what, len(counts), len(displs), n)
	}
	bc, bd := make([]int, n), make([]int, n)
	for r := range n {
		if counts[r] < 0 || displs[r] < 0 {
			return nil, nil, errorf(ErrCount, op, "%s: negative count or displacement for rank %d", what, r)
		}
		if displs[r]+counts[r] > size {
			return nil, nil, errorf(ErrCount, op, "%s: rank %d's block [%d, %d) is outside the buffer of %d elements", what, r, displs[r], displs[r]+counts[r], size)
		}
		bc[r], bd[r] = counts[r]*elem, displs[r]*elem
	}
	return bc, bd, nil
}

// Barrier blocks until every rank of c has called it.
func Barrier(c *Comm) error {
	if c.IsInter() {
		return c.fail(c.interRun(interBarrier("Barrier", c)))
	}
	v, err := c.begin("Barrier")
	if err != nil {
		return err
	}
	return c.fail(finish("Barrier", &v, &call{fn: barrierFn}, nil))
}

func barrierFn(v *coll.Comm, a *coll.Args) error { return coll.Barrier(v, a) }

// Bcast copies root's buf into buf at every rank of c. Every rank passes a
// buffer of the same length. On an intercommunicator the root passes
// Root, the other processes of its group ProcNull (their buf is left
// alone), and the processes of the other group the root's rank in its
// group.
func Bcast[T Element](c *Comm, buf []T, root int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interBcast("Bcast", c, buf, root)))
	}
	v, err := c.begin("Bcast")
	if err != nil {
		return err
	}
	cl, err := bcastCall("Bcast", c, buf, root)
	return c.fail(finish("Bcast", &v, &cl, err))
}

func bcastCall[T Element](op string, c *Comm, buf []T, root int) (call, error) {
	if err := c.checkRoot(op, root); err != nil {
		return call{}, err
	}
	return call{fn: coll.Bcast, args: coll.Args{Recv: elemBytes(buf), Root: root}}, nil
}

// Reduce combines sendbuf of every rank with op into recvbuf at root.
// recvbuf matters at root only (other ranks may pass nil). At root,
// sendbuf may be recvbuf itself (in place). On an intercommunicator the
// root passes Root and receives in recvbuf the reduction of the other
// group's sendbufs (len(recvbuf) elements each); the other processes of
// its group pass ProcNull, those of the other group the root's rank in
// its group.
func Reduce[T Element](c *Comm, sendbuf, recvbuf []T, op Op, root int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interReduce("Reduce", c, sendbuf, recvbuf, op, root)))
	}
	v, err := c.begin("Reduce")
	if err != nil {
		return err
	}
	cl, err := reduceCall("Reduce", c, sendbuf, recvbuf, op, root)
	return c.fail(finish("Reduce", &v, &cl, err))
}

func reduceCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, op Op, root int) (call, error) {
	if err := c.checkRoot(name, root); err != nil {
		return call{}, err
	}
	o, err := bind[T](name, op)
	if err != nil {
		return call{}, err
	}
	a := coll.Args{Send: elemBytes(sendbuf), Op: o, Elem: elemSize[T](), Root: root}
	if c.rank == root {
		if len(recvbuf) < len(sendbuf) {
			return call{}, errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
		}
		a.Recv = elemBytes(recvbuf[:len(sendbuf)])
		in, err := inPlace(name, a.Send, a.Recv)
		if err != nil {
			return call{}, err
		}
		if in {
			a.Send = nil
		}
	}
	return call{fn: coll.Reduce, args: a}, nil
}

// Allreduce combines sendbuf of every rank with op into recvbuf at every
// rank. sendbuf may be recvbuf itself (in place). On an intercommunicator
// each group receives the reduction of the other group's sendbufs.
func Allreduce[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	if c.IsInter() {
		return c.fail(c.interRun(interAllreduce("Allreduce", c, sendbuf, recvbuf, op)))
	}
	v, err := c.begin("Allreduce")
	if err != nil {
		return err
	}
	cl, err := reductionCall("Allreduce", coll.Allreduce, sendbuf, recvbuf, op)
	return c.fail(finish("Allreduce", &v, &cl, err))
}

// reductionCall prepares Allreduce, Scan and Exscan: the count is
// len(sendbuf), recvbuf must hold as many, and sendbuf may be recvbuf.
func reductionCall[T Element](name string, fn func(*coll.Comm, *coll.Args) error, sendbuf, recvbuf []T, op Op) (call, error) {
	o, err := bind[T](name, op)
	if err != nil {
		return call{}, err
	}
	if len(recvbuf) < len(sendbuf) {
		return call{}, errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
	}
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf[:len(sendbuf)]), Op: o, Elem: elemSize[T]()}
	in, err := inPlace(name, a.Send, a.Recv)
	if err != nil {
		return call{}, err
	}
	if in {
		a.Send = nil
	}
	return call{fn: fn, args: a}, nil
}

// Scan leaves sendbuf(0) ⊕ sendbuf(1) ⊕ ... ⊕ sendbuf(r) in recvbuf at
// rank r (MPI_Scan). sendbuf may be recvbuf itself (in place).
func Scan[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	v, err := c.begin("Scan")
	if err != nil {
		return err
	}
	cl, err := reductionCall("Scan", coll.Scan, sendbuf, recvbuf, op)
	return c.fail(finish("Scan", &v, &cl, err))
}

// Exscan leaves sendbuf(0) ⊕ ... ⊕ sendbuf(r-1) in recvbuf at rank r > 0
// (MPI_Exscan); rank 0's recvbuf is not written. sendbuf may be recvbuf
// itself (in place).
func Exscan[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	v, err := c.begin("Exscan")
	if err != nil {
		return err
	}
	cl, err := reductionCall("Exscan", coll.Exscan, sendbuf, recvbuf, op)
	return c.fail(finish("Exscan", &v, &cl, err))
}

// Gather collects every rank's sendbuf (all of the same length k) into
// recvbuf at root, rank r's at recvbuf[r*k:(r+1)*k]. recvbuf matters at
// root only. In place: root passes its own block of recvbuf as sendbuf.
// On an intercommunicator the root (Root) receives the other group's
// sendbufs in its rank order; roots are passed as for Reduce.
func Gather[T Element](c *Comm, sendbuf, recvbuf []T, root int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interGather("Gather", c, sendbuf, recvbuf, root)))
	}
	v, err := c.begin("Gather")
	if err != nil {
		return err
	}
	cl, err := gatherCall("Gather", c, sendbuf, recvbuf, root)
	return c.fail(finish("Gather", &v, &cl, err))
}

func gatherCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, root int) (call, error) {
	if err := c.checkRoot(name, root); err != nil {
		return call{}, err
	}
	a := coll.Args{Send: elemBytes(sendbuf), Root: root}
	if c.rank == root {
		k, n := len(sendbuf), c.Size()
		if len(recvbuf) < n*k {
			return call{}, errorf(ErrCount, name, "receive buffer of %d elements for %d ranks of %d", len(recvbuf), n, k)
		}
		a.Recv = elemBytes(recvbuf[:n*k])
		in, err := ownBlock(name, a.Send, a.Recv, root*len(a.Send))
		if err != nil {
			return call{}, err
		}
		if in {
			a.Send = nil
		}
	}
	return call{fn: coll.Gather, args: a}, nil
}

// Gatherv collects every rank's sendbuf into recvbuf at root, rank r's
// counts[r] elements at displs[r]; counts, displs and recvbuf matter at
// root only. In place: root passes recvbuf[displs[root]:][:counts[root]]
// as sendbuf. On an intercommunicator the root (Root) receives remote
// process j's sendbuf at displs[j] (counts and displs have RemoteSize
// entries); roots are passed as for Reduce.
func Gatherv[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int, root int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interGatherv("Gatherv", c, sendbuf, recvbuf, counts, displs, root)))
	}
	v, err := c.begin("Gatherv")
	if err != nil {
		return err
	}
	cl, err := gathervCall("Gatherv", c, sendbuf, recvbuf, counts, displs, root)
	return c.fail(finish("Gatherv", &v, &cl, err))
}

func gathervCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, counts, displs []int, root int) (call, error) {
	if err := c.checkRoot(name, root); err != nil {
		return call{}, err
	}
	a := coll.Args{Send: elemBytes(sendbuf), Root: root}
	if c.rank == root {
		var err error
		es := elemSize[T]()
		if a.Counts, a.Displs, err = layout(name, "receive", c.Size(), counts, displs, len(recvbuf), es); err != nil {
			return call{}, err
		}
		a.Recv = elemBytes(recvbuf)
		in, err := ownBlock(name, a.Send, a.Recv, a.Displs[root])
		if err != nil {
			return call{}, err
		}
		switch {
		case in && len(a.Send) == a.Counts[root]:
			a.Send = nil
		case len(sendbuf) != counts[root]:
			return call{}, errorf(ErrCount, name, "root sends %d elements where counts[%d] is %d", len(sendbuf), root, counts[root])
		}
	}
	return call{fn: coll.Gatherv, args: a}, nil
}

// Scatter sends block r of root's sendbuf (recvbuf's length k each) to
// rank r's recvbuf. sendbuf matters at root only. In place: root passes
// its own block of sendbuf as recvbuf. On an intercommunicator the root
// (Root) sends block j to process j of the other group; roots are passed
// as for Reduce.
func Scatter[T Element](c *Comm, sendbuf, recvbuf []T, root int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interScatter("Scatter", c, sendbuf, recvbuf, root)))
	}
	v, err := c.begin("Scatter")
	if err != nil {
		return err
	}
	cl, err := scatterCall("Scatter", c, sendbuf, recvbuf, root)
	return c.fail(finish("Scatter", &v, &cl, err))
}

func scatterCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, root int) (call, error) {
	if err := c.checkRoot(name, root); err != nil {
		return call{}, err
	}
	a := coll.Args{Recv: elemBytes(recvbuf), Root: root}
	if c.rank == root {
		k, n := len(recvbuf), c.Size()
		if len(sendbuf) < n*k {
			return call{}, errorf(ErrCount, name, "send buffer of %d elements for %d ranks of %d", len(sendbuf), n, k)
		}
		a.Send = elemBytes(sendbuf[:n*k])
		in, err := ownBlock(name, a.Recv, a.Send, root*len(a.Recv))
		if err != nil {
			return call{}, err
		}
		if in {
			a.Recv = nil
		}
	}
	return call{fn: coll.Scatter, args: a}, nil
}

// Scatterv sends counts[r] elements at displs[r] of root's sendbuf to rank
// r's recvbuf, which must be exactly that long. sendbuf, counts and
// displs matter at root only. In place: root passes its own block of
// sendbuf as recvbuf. On an intercommunicator the root (Root) sends block
// j to process j of the other group (counts and displs have RemoteSize
// entries); roots are passed as for Reduce.
func Scatterv[T Element](c *Comm, sendbuf []T, counts, displs []int, recvbuf []T, root int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interScatterv("Scatterv", c, sendbuf, counts, displs, recvbuf, root)))
	}
	v, err := c.begin("Scatterv")
	if err != nil {
		return err
	}
	cl, err := scattervCall("Scatterv", c, sendbuf, counts, displs, recvbuf, root)
	return c.fail(finish("Scatterv", &v, &cl, err))
}

func scattervCall[T Element](name string, c *Comm, sendbuf []T, counts, displs []int, recvbuf []T, root int) (call, error) {
	if err := c.checkRoot(name, root); err != nil {
		return call{}, err
	}
	a := coll.Args{Recv: elemBytes(recvbuf), Root: root}
	if c.rank == root {
		var err error
		if a.Counts, a.Displs, err = layout(name, "send", c.Size(), counts, displs, len(sendbuf), elemSize[T]()); err != nil {
			return call{}, err
		}
		a.Send = elemBytes(sendbuf)
		in, err := ownBlock(name, a.Recv, a.Send, a.Displs[root])
		if err != nil {
			return call{}, err
		}
		switch {
		case in && len(a.Recv) == a.Counts[root]:
			a.Recv = nil
		case len(recvbuf) != counts[root]:
			return call{}, errorf(ErrCount, name, "root receives %d elements where counts[%d] is %d", len(recvbuf), root, counts[root])
		}
	}
	return call{fn: coll.Scatterv, args: a}, nil
}

// Allgather collects every rank's sendbuf (all of length k) into recvbuf
// at every rank, rank r's at recvbuf[r*k:(r+1)*k]. In place: pass this
// rank's own block of recvbuf as sendbuf. On an intercommunicator each
// group receives the other group's sendbufs, in its rank order, at the
// start of recvbuf.
func Allgather[T Element](c *Comm, sendbuf, recvbuf []T) error {
	if c.IsInter() {
		return c.fail(c.interRun(interAllgather("Allgather", c, sendbuf, recvbuf)))
	}
	v, err := c.begin("Allgather")
	if err != nil {
		return err
	}
	cl, err := allgatherCall("Allgather", c, sendbuf, recvbuf)
	return c.fail(finish("Allgather", &v, &cl, err))
}

func allgatherCall[T Element](name string, c *Comm, sendbuf, recvbuf []T) (call, error) {
	k, n := len(sendbuf), c.Size()
	if len(recvbuf) < n*k {
		return call{}, errorf(ErrCount, name, "receive buffer of %d elements for %d ranks of %d", len(recvbuf), n, k)
	}
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf[:n*k])}
	in, err := ownBlock(name, a.Send, a.Recv, c.rank*len(a.Send))
	if err != nil {
		return call{}, err
	}
	if in {
		a.Send = nil
	}
	return call{fn: coll.Allgather, args: a}, nil
}

// Allgatherv collects every rank's sendbuf into recvbuf at every rank,
// rank r's counts[r] elements at displs[r] (the same counts and displs at
// every rank). In place: pass recvbuf[displs[r]:][:counts[r]] as sendbuf.
// On an intercommunicator each group receives the other group's sendbufs,
// remote process j's at displs[j] (counts and displs have RemoteSize
// entries, the same at every process of a group; no in-place form).
func Allgatherv[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interAllgatherv("Allgatherv", c, sendbuf, recvbuf, counts, displs)))
	}
	v, err := c.begin("Allgatherv")
	if err != nil {
		return err
	}
	cl, err := allgathervCall("Allgatherv", c, sendbuf, recvbuf, counts, displs)
	return c.fail(finish("Allgatherv", &v, &cl, err))
}

func allgathervCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, counts, displs []int) (call, error) {
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	var err error
	if a.Counts, a.Displs, err = layout(name, "receive", c.Size(), counts, displs, len(recvbuf), elemSize[T]()); err != nil {
		return call{}, err
	}
	in, err := ownBlock(name, a.Send, a.Recv, a.Displs[c.rank])
	if err != nil {
		return call{}, err
	}
	switch {
	case in && len(a.Send) == a.Counts[c.rank]:
		a.Send = nil
	case len(sendbuf) != counts[c.rank]:
		return call{}, errorf(ErrCount, name, "rank %d sends %d elements where counts[%d] is %d", c.rank, len(sendbuf), c.rank, counts[c.rank])
	}
	return call{fn: coll.Allgatherv, args: a}, nil
}

// Alltoall sends block r of every rank's sendbuf to rank r, which stores
// it at block (sender) of its recvbuf; blocks are len(sendbuf)/size
// elements. In place: pass recvbuf as sendbuf. On an intercommunicator
// block j goes to process j of the other group, and the buffers hold
// RemoteSize blocks (no in-place form).
func Alltoall[T Element](c *Comm, sendbuf, recvbuf []T) error {
	if c.IsInter() {
		return c.fail(c.interRun(interAlltoall("Alltoall", c, sendbuf, recvbuf)))
	}
	v, err := c.begin("Alltoall")
	if err != nil {
		return err
	}
	cl, err := alltoallCall("Alltoall", c, sendbuf, recvbuf)
	return c.fail(finish("Alltoall", &v, &cl, err))
}

func alltoallCall[T Element](name string, c *Comm, sendbuf, recvbuf []T) (call, error) {
	n := c.Size()
	if len(sendbuf)%n != 0 {
		return call{}, errorf(ErrCount, name, "send buffer of %d elements is not %d equal blocks", len(sendbuf), n)
	}
	if len(recvbuf) < len(sendbuf) {
		return call{}, errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
	}
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf[:len(sendbuf)])}
	in, err := inPlace(name, a.Send, a.Recv)
	if err != nil {
		return call{}, err
	}
	if in {
		a.Send = nil
	}
	return call{fn: coll.Alltoall, args: a}, nil
}

// Alltoallv sends sendcounts[r] elements at sdispls[r] of sendbuf to rank
// r and receives recvcounts[r] elements from rank r at rdispls[r] of
// recvbuf. In place: pass recvbuf as sendbuf (recvcounts and rdispls
// then describe both sides). On an intercommunicator r is a rank of the
// other group (the counts and displacements have RemoteSize entries; no
// in-place form).
func Alltoallv[T Element](c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) error {
	if c.IsInter() {
		return c.fail(c.interRun(interAlltoallv("Alltoallv", c, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls)))
	}
	v, err := c.begin("Alltoallv")
	if err != nil {
		return err
	}
	cl, err := alltoallvCall("Alltoallv", c, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls)
	return c.fail(finish("Alltoallv", &v, &cl, err))
}

func alltoallvCall[T Element](name string, c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) (call, error) {
	n, es := c.Size(), elemSize[T]()
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	var err error
	if a.Counts, a.Displs, err = layout(name, "receive", n, recvcounts, rdispls, len(recvbuf), es); err != nil {
		return call{}, err
	}
	in, err := inPlace(name, a.Send, a.Recv)
	if err != nil {
		return call{}, err
	}
	if in {
		a.Send, a.SendCounts, a.SendDispls = nil, a.Counts, a.Displs
	} else if a.SendCounts, a.SendDispls, err = layout(name, "send", n, sendcounts, sdispls, len(sendbuf), es); err != nil {
		return call{}, err
	}
	return call{fn: coll.Alltoallv, args: a}, nil
}

// ReduceScatter reduces every rank's sendbuf with op and leaves block r
// (recvcounts[r] elements, the blocks laid end to end in sendbuf) in
// recvbuf at rank r. In place: pass recvbuf as sendbuf; the result is then
// at its start. On an intercommunicator the reduction of the other
// group's sendbufs is scattered over this group by this group's
// recvcounts; both groups' sendbufs hold the sum of their group's
// recvcounts, which must be equal (no in-place form).
func ReduceScatter[T Element](c *Comm, sendbuf, recvbuf []T, recvcounts []int, op Op) error {
	if c.IsInter() {
		return c.fail(c.interRun(interReduceScatter("ReduceScatter", c, sendbuf, recvbuf, recvcounts, op)))
	}
	v, err := c.begin("ReduceScatter")
	if err != nil {
		return err
	}
	cl, err := reduceScatterCall("ReduceScatter", c, sendbuf, recvbuf, recvcounts, op)
	return c.fail(finish("ReduceScatter", &v, &cl, err))
}

func reduceScatterCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, recvcounts []int, op Op) (call, error) {
	o, err := bind[T](name, op)
	if err != nil {
		return call{}, err
	}
	es := elemSize[T]()
	counts, total, err := scatterCounts(name, c.Size(), recvcounts, es)
	if err != nil {
		return call{}, err
	}
	if len(sendbuf) < total {
		return call{}, errorf(ErrCount, name, "send buffer of %d elements for %d", len(sendbuf), total)
	}
	a := coll.Args{Send: elemBytes(sendbuf[:total]), Recv: elemBytes(recvbuf), Counts: counts, Op: o, Elem: es}
	in, err := inPlace(name, elemBytes(sendbuf), a.Recv)
	if err != nil {
		return call{}, err
	}
	if in {
		a.Send = nil
	} else if len(recvbuf) < recvcounts[c.rank] {
		return call{}, errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), recvcounts[c.rank])
	}
	return call{fn: coll.ReduceScatter, args: a}, nil
}

// scatterCounts checks Reduce_scatter's recvcounts (one per rank of n, none
// negative) and returns them in bytes of es-byte elements, with their
// total in elements.
func scatterCounts(name string, n int, recvcounts []int, es int) (counts []int, total int, err error) {
	if len(recvcounts) != n {
		return nil, 0, errorf(ErrCount, name, "%d counts for %d ranks", len(recvcounts), n)
	}
	counts = make([]int, n)
	for r, k := range recvcounts {
		if k < 0 {
			return nil, 0, errorf(ErrCount, name, "negative count %d for rank %d", k, r)
		}
		total += k
		counts[r] = k * es
	}
	return counts, total, nil
}

// ReduceScatterBlock reduces every rank's sendbuf (size blocks of
// len(sendbuf)/size elements) with op and leaves block r in recvbuf at
// rank r. In place: pass recvbuf as sendbuf; the result is then at its
// start. On an intercommunicator the reduction of the other group's
// sendbufs, which have the length of this group's, is scattered over this
// group (no in-place form).
func ReduceScatterBlock[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	if c.IsInter() {
		return c.fail(c.interRun(interReduceScatterBlock("ReduceScatterBlock", c, sendbuf, recvbuf, op)))
	}
	v, err := c.begin("ReduceScatterBlock")
	if err != nil {
		return err
	}
	cl, err := reduceScatterBlockCall("ReduceScatterBlock", c, sendbuf, recvbuf, op)
	return c.fail(finish("ReduceScatterBlock", &v, &cl, err))
}

func reduceScatterBlockCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, op Op) (call, error) {
	n := c.Size()
	if len(sendbuf)%n != 0 {
		return call{}, errorf(ErrCount, name, "send buffer of %d elements is not %d equal blocks", len(sendbuf), n)
	}
	counts := make([]int, n)
	for r := range counts {
		counts[r] = len(sendbuf) / n
	}
	cl, err := reduceScatterCall(name, c, sendbuf, recvbuf, counts, op)
	cl.fn = coll.ReduceScatterBlock
	return cl, err
}
