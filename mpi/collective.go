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
// byte arguments. The constructors (bcastCall, reductionCall...) fill a
// zero call in place and set only the fields their collective uses: a
// blocking call's comes zeroed from runPool, others are declared just
// before.
type call struct {
	fn   func(*coll.Comm, *coll.Args) error
	args coll.Args
}

// begin checks c and starts a call on it; an error has been through
// c's handler.
func (c *Comm) begin(op string) (coll.Comm, error) {
	var v coll.Comm
	err := c.beginInto(op, &v) // before v is read: a return's operands have no set order but the calls'
	return v, err
}

// beginInto is begin that writes the call's view into v.
func (c *Comm) beginInto(op string, v *coll.Comm) error {
	if err := c.check(op); err != nil {
		return c.fail(err)
	}
	if err := c.intra(op); err != nil {
		return c.fail(err)
	}
	c.cc.BeginInto(v)
	return nil
}

// beginRun is begin for a blocking call: the view goes straight into the
// running that finish takes (nil on an error, which has been through c's
// handler).
func (c *Comm) beginRun(op string) (*running, error) {
	r := getRunning()
	if err := c.beginInto(op, &r.v); err != nil {
		runPool.Put(r)
		return nil, err
	}
	return r, nil
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

// running is a blocking call's state: the call, which its constructor
// (bcastCall...) writes into it, and the view its algorithm runs on. The
// algorithms are called through function values, which makes everything
// they are handed escape to the heap; running comes from a pool instead,
// so that a small blocking collective allocates nothing here. The call and
// the view are built where the algorithm reads them (beginRun, the
// constructors' cl): returned by value and copied into the pool's (the
// call's coll.Args is 376 bytes, the view 120), they were more than half
// of a blocking Allreduce's own cost, 108-113 ns a call against 45-46
// now on the 2-core VM (BenchmarkAllreduceSelf).
type running struct {
	v  coll.Comm
	cl call
}

var runPool = sync.Pool{New: func() any { return new(running) }}

// getRunning returns a zero running from the pool, for finish.
func getRunning() *running { return runPool.Get().(*running) }

// finish runs the blocking call prepared in r (or reports why it could
// not be prepared), tells the other ranks if it failed, and gives r back.
// Every blocking call comes here, with good arguments or not, and readies
// the communicator first (coll.Comm.Prepare: the shared-memory set-up at
// its first blocking call), so that every rank does that at the same call.
func finish(op string, r *running, err error) error {
	v := &r.v
	if perr := v.Prepare(); perr != nil && err == nil {
		err = wrapColl(op, perr)
	}
	if err == nil {
		err = wrapColl(op, r.cl.fn(v, &r.cl.args))
	}
	if err != nil {
		v.Abort(int(classOf(err)), err)
	}
	*r = running{}
	runPool.Put(r)
	return err
}

// finishCall is finish for a call begun and prepared outside the pool.
func finishCall(op string, v *coll.Comm, cl *call, err error) error {
	r := getRunning()
	r.v, r.cl = *v, *cl
	return finish(op, r, err)
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
	r, err := c.beginRun("Barrier")
	if err != nil {
		return err
	}
	r.cl.fn = barrierFn
	return c.fail(finish("Barrier", r, nil))
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
	r, err := c.beginRun("Bcast")
	if err != nil {
		return err
	}
	err = bcastCall("Bcast", c, buf, root, &r.cl)
	return c.fail(finish("Bcast", r, err))
}

func bcastCall[T Element](op string, c *Comm, buf []T, root int, cl *call) error {
	if err := c.checkRoot(op, root); err != nil {
		return err
	}
	cl.fn, cl.args.Recv, cl.args.Root = coll.Bcast, elemBytes(buf), root
	return nil
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
	r, err := c.beginRun("Reduce")
	if err != nil {
		return err
	}
	err = reduceCall("Reduce", c, sendbuf, recvbuf, op, root, &r.cl)
	return c.fail(finish("Reduce", r, err))
}

func reduceCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, op Op, root int, cl *call) error {
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	o, err := bind[T](name, op)
	if err != nil {
		return err
	}
	a := &cl.args
	a.Send, a.Op, a.Elem, a.Root = elemBytes(sendbuf), o, elemSize[T](), root
	if c.rank == root {
		if len(recvbuf) < len(sendbuf) {
			return errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
		}
		a.Recv = elemBytes(recvbuf[:len(sendbuf)])
		in, err := inPlace(name, a.Send, a.Recv)
		if err != nil {
			return err
		}
		if in {
			a.Send = nil
		}
	}
	cl.fn = coll.Reduce
	return nil
}

// Allreduce combines sendbuf of every rank with op into recvbuf at every
// rank. sendbuf may be recvbuf itself (in place). On an intercommunicator
// each group receives the reduction of the other group's sendbufs.
func Allreduce[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	if c.IsInter() {
		return c.fail(c.interRun(interAllreduce("Allreduce", c, sendbuf, recvbuf, op)))
	}
	r, err := c.beginRun("Allreduce")
	if err != nil {
		return err
	}
	err = reductionCall("Allreduce", coll.Allreduce, sendbuf, recvbuf, op, &r.cl)
	return c.fail(finish("Allreduce", r, err))
}

// reductionCall prepares Allreduce, Scan and Exscan: the count is
// len(sendbuf), recvbuf must hold as many, and sendbuf may be recvbuf.
func reductionCall[T Element](name string, fn func(*coll.Comm, *coll.Args) error, sendbuf, recvbuf []T, op Op, cl *call) error {
	o, err := bind[T](name, op)
	if err != nil {
		return err
	}
	if len(recvbuf) < len(sendbuf) {
		return errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
	}
	a := &cl.args
	a.Send, a.Recv, a.Op, a.Elem = elemBytes(sendbuf), elemBytes(recvbuf[:len(sendbuf)]), o, elemSize[T]()
	in, err := inPlace(name, a.Send, a.Recv)
	if err != nil {
		return err
	}
	if in {
		a.Send = nil
	}
	cl.fn = fn
	return nil
}

// Scan leaves sendbuf(0) ⊕ sendbuf(1) ⊕ ... ⊕ sendbuf(r) in recvbuf at
// rank r (MPI_Scan). sendbuf may be recvbuf itself (in place).
func Scan[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	r, err := c.beginRun("Scan")
	if err != nil {
		return err
	}
	err = reductionCall("Scan", coll.Scan, sendbuf, recvbuf, op, &r.cl)
	return c.fail(finish("Scan", r, err))
}

// Exscan leaves sendbuf(0) ⊕ ... ⊕ sendbuf(r-1) in recvbuf at rank r > 0
// (MPI_Exscan); rank 0's recvbuf is not written. sendbuf may be recvbuf
// itself (in place).
func Exscan[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	r, err := c.beginRun("Exscan")
	if err != nil {
		return err
	}
	err = reductionCall("Exscan", coll.Exscan, sendbuf, recvbuf, op, &r.cl)
	return c.fail(finish("Exscan", r, err))
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
	r, err := c.beginRun("Gather")
	if err != nil {
		return err
	}
	err = gatherCall("Gather", c, sendbuf, recvbuf, root, &r.cl)
	return c.fail(finish("Gather", r, err))
}

func gatherCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, root int, cl *call) error {
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	a := &cl.args
	a.Send, a.Root = elemBytes(sendbuf), root
	if c.rank == root {
		k, n := len(sendbuf), c.Size()
		if len(recvbuf) < n*k {
			return errorf(ErrCount, name, "receive buffer of %d elements for %d ranks of %d", len(recvbuf), n, k)
		}
		a.Recv = elemBytes(recvbuf[:n*k])
		in, err := ownBlock(name, a.Send, a.Recv, root*len(a.Send))
		if err != nil {
			return err
		}
		if in {
			a.Send = nil
		}
	}
	cl.fn = coll.Gather
	return nil
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
	r, err := c.beginRun("Gatherv")
	if err != nil {
		return err
	}
	err = gathervCall("Gatherv", c, sendbuf, recvbuf, counts, displs, root, &r.cl)
	return c.fail(finish("Gatherv", r, err))
}

func gathervCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, counts, displs []int, root int, cl *call) error {
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	a := &cl.args
	a.Send, a.Root = elemBytes(sendbuf), root
	if c.rank == root {
		var err error
		es := elemSize[T]()
		if a.Counts, a.Displs, err = layout(name, "receive", c.Size(), counts, displs, len(recvbuf), es); err != nil {
			return err
		}
		a.Recv = elemBytes(recvbuf)
		in, err := ownBlock(name, a.Send, a.Recv, a.Displs[root])
		if err != nil {
			return err
		}
		switch {
		case in && len(a.Send) == a.Counts[root]:
			a.Send = nil
		case len(sendbuf) != counts[root]:
			return errorf(ErrCount, name, "root sends %d elements where counts[%d] is %d", len(sendbuf), root, counts[root])
		}
	}
	cl.fn = coll.Gatherv
	return nil
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
	r, err := c.beginRun("Scatter")
	if err != nil {
		return err
	}
	err = scatterCall("Scatter", c, sendbuf, recvbuf, root, &r.cl)
	return c.fail(finish("Scatter", r, err))
}

func scatterCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, root int, cl *call) error {
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	a := &cl.args
	a.Recv, a.Root = elemBytes(recvbuf), root
	if c.rank == root {
		k, n := len(recvbuf), c.Size()
		if len(sendbuf) < n*k {
			return errorf(ErrCount, name, "send buffer of %d elements for %d ranks of %d", len(sendbuf), n, k)
		}
		a.Send = elemBytes(sendbuf[:n*k])
		in, err := ownBlock(name, a.Recv, a.Send, root*len(a.Recv))
		if err != nil {
			return err
		}
		if in {
			a.Recv = nil
		}
	}
	cl.fn = coll.Scatter
	return nil
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
	r, err := c.beginRun("Scatterv")
	if err != nil {
		return err
	}
	err = scattervCall("Scatterv", c, sendbuf, counts, displs, recvbuf, root, &r.cl)
	return c.fail(finish("Scatterv", r, err))
}

func scattervCall[T Element](name string, c *Comm, sendbuf []T, counts, displs []int, recvbuf []T, root int, cl *call) error {
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	a := &cl.args
	a.Recv, a.Root = elemBytes(recvbuf), root
	if c.rank == root {
		var err error
		if a.Counts, a.Displs, err = layout(name, "send", c.Size(), counts, displs, len(sendbuf), elemSize[T]()); err != nil {
			return err
		}
		a.Send = elemBytes(sendbuf)
		in, err := ownBlock(name, a.Recv, a.Send, a.Displs[root])
		if err != nil {
			return err
		}
		switch {
		case in && len(a.Recv) == a.Counts[root]:
			a.Recv = nil
		case len(recvbuf) != counts[root]:
			return errorf(ErrCount, name, "root receives %d elements where counts[%d] is %d", len(recvbuf), root, counts[root])
		}
	}
	cl.fn = coll.Scatterv
	return nil
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
	r, err := c.beginRun("Allgather")
	if err != nil {
		return err
	}
	err = allgatherCall("Allgather", c, sendbuf, recvbuf, &r.cl)
	return c.fail(finish("Allgather", r, err))
}

func allgatherCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, cl *call) error {
	k, n := len(sendbuf), c.Size()
	if len(recvbuf) < n*k {
		return errorf(ErrCount, name, "receive buffer of %d elements for %d ranks of %d", len(recvbuf), n, k)
	}
	a := &cl.args
	a.Send, a.Recv = elemBytes(sendbuf), elemBytes(recvbuf[:n*k])
	in, err := ownBlock(name, a.Send, a.Recv, c.rank*len(a.Send))
	if err != nil {
		return err
	}
	if in {
		a.Send = nil
	}
	cl.fn = coll.Allgather
	return nil
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
	r, err := c.beginRun("Allgatherv")
	if err != nil {
		return err
	}
	err = allgathervCall("Allgatherv", c, sendbuf, recvbuf, counts, displs, &r.cl)
	return c.fail(finish("Allgatherv", r, err))
}

func allgathervCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, counts, displs []int, cl *call) error {
	a := &cl.args
	a.Send, a.Recv = elemBytes(sendbuf), elemBytes(recvbuf)
	var err error
	if a.Counts, a.Displs, err = layout(name, "receive", c.Size(), counts, displs, len(recvbuf), elemSize[T]()); err != nil {
		return err
	}
	in, err := ownBlock(name, a.Send, a.Recv, a.Displs[c.rank])
	if err != nil {
		return err
	}
	switch {
	case in && len(a.Send) == a.Counts[c.rank]:
		a.Send = nil
	case len(sendbuf) != counts[c.rank]:
		return errorf(ErrCount, name, "rank %d sends %d elements where counts[%d] is %d", c.rank, len(sendbuf), c.rank, counts[c.rank])
	}
	cl.fn = coll.Allgatherv
	return nil
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
	r, err := c.beginRun("Alltoall")
	if err != nil {
		return err
	}
	err = alltoallCall("Alltoall", c, sendbuf, recvbuf, &r.cl)
	return c.fail(finish("Alltoall", r, err))
}

func alltoallCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, cl *call) error {
	n := c.Size()
	if len(sendbuf)%n != 0 {
		return errorf(ErrCount, name, "send buffer of %d elements is not %d equal blocks", len(sendbuf), n)
	}
	if len(recvbuf) < len(sendbuf) {
		return errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
	}
	a := &cl.args
	a.Send, a.Recv = elemBytes(sendbuf), elemBytes(recvbuf[:len(sendbuf)])
	in, err := inPlace(name, a.Send, a.Recv)
	if err != nil {
		return err
	}
	if in {
		a.Send = nil
	}
	cl.fn = coll.Alltoall
	return nil
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
	r, err := c.beginRun("Alltoallv")
	if err != nil {
		return err
	}
	err = alltoallvCall("Alltoallv", c, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &r.cl)
	return c.fail(finish("Alltoallv", r, err))
}

func alltoallvCall[T Element](name string, c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int, cl *call) error {
	n, es := c.Size(), elemSize[T]()
	a := &cl.args
	a.Send, a.Recv = elemBytes(sendbuf), elemBytes(recvbuf)
	var err error
	if a.Counts, a.Displs, err = layout(name, "receive", n, recvcounts, rdispls, len(recvbuf), es); err != nil {
		return err
	}
	in, err := inPlace(name, a.Send, a.Recv)
	if err != nil {
		return err
	}
	if in {
		a.Send, a.SendCounts, a.SendDispls = nil, a.Counts, a.Displs
	} else if a.SendCounts, a.SendDispls, err = layout(name, "send", n, sendcounts, sdispls, len(sendbuf), es); err != nil {
		return err
	}
	cl.fn = coll.Alltoallv
	return nil
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
	r, err := c.beginRun("ReduceScatter")
	if err != nil {
		return err
	}
	err = reduceScatterCall("ReduceScatter", c, sendbuf, recvbuf, recvcounts, op, &r.cl)
	return c.fail(finish("ReduceScatter", r, err))
}

func reduceScatterCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, recvcounts []int, op Op, cl *call) error {
	o, err := bind[T](name, op)
	if err != nil {
		return err
	}
	es := elemSize[T]()
	counts, total, err := scatterCounts(name, c.Size(), recvcounts, es)
	if err != nil {
		return err
	}
	if len(sendbuf) < total {
		return errorf(ErrCount, name, "send buffer of %d elements for %d", len(sendbuf), total)
	}
	a := &cl.args
	a.Send, a.Recv, a.Counts, a.Op, a.Elem = elemBytes(sendbuf[:total]), elemBytes(recvbuf), counts, o, es
	in, err := inPlace(name, elemBytes(sendbuf), a.Recv)
	if err != nil {
		return err
	}
	if in {
		a.Send = nil
	} else if len(recvbuf) < recvcounts[c.rank] {
		return errorf(ErrCount, name, "receive buffer of %d elements for %d", len(recvbuf), recvcounts[c.rank])
	}
	cl.fn = coll.ReduceScatter
	return nil
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
	r, err := c.beginRun("ReduceScatterBlock")
	if err != nil {
		return err
	}
	err = reduceScatterBlockCall("ReduceScatterBlock", c, sendbuf, recvbuf, op, &r.cl)
	return c.fail(finish("ReduceScatterBlock", r, err))
}

func reduceScatterBlockCall[T Element](name string, c *Comm, sendbuf, recvbuf []T, op Op, cl *call) error {
	n := c.Size()
	if len(sendbuf)%n != 0 {
		return errorf(ErrCount, name, "send buffer of %d elements is not %d equal blocks", len(sendbuf), n)
	}
	counts := make([]int, n)
	for r := range counts {
		counts[r] = len(sendbuf) / n
	}
	err := reduceScatterCall(name, c, sendbuf, recvbuf, counts, op, cl)
	cl.fn = coll.ReduceScatterBlock
	return err
}
