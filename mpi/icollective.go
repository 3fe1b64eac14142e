package mpi

import (
	"sync"

	"github.com/gorun/gorun/coll"
)

// Nonblocking collectives.
//
// Each returns a Request at once; Wait, Test, Waitall and the rest complete
// it as they do point-to-point requests. Until then the buffers belong to
// the call. Calls on one communicator (blocking or not) must be made in
// the same order at every rank, but any number may be in flight at once:
// each call has its own sequence number and tag, so their messages never
// match each other's.
//
// How they progress: each call runs its algorithm (in shared memory when
// the communicator's segment is ready as the call begins, in its turn
// among the communicator's calls: coll's nbturn.go) on a goroutine of the
// process's pool (helpers.go), which polls the transports as any blocking
// call does; at its end it sends a zero-byte notice to this rank itself,
// which completes the Request's receive. While one runs, every wait of
// the process gives way to it (p2p's Engine.Helping), but for the call's
// own when a Wait sleeps for it (Engine.Parked). The call therefore
// progresses without a progress thread: beside the caller's computation
// where the rank has a CPU to spare, else (a rank bound to one CPU runs
// one P) whenever the caller waits, tests or is preempted; and an MPI
// program that relies on nonblocking collectives progressing
// independently (Ibarrier, then a synchronous send) cannot deadlock. The
// price is a goroutine hand-off each way and the self-message: an
// Ibarrier and its Wait took 1.8-4x Open MPI's time at np=2-32 on the
// lent 32-core host (docs/measurements.md, "Nonblocking collectives").
//
// On an intercommunicator every one of them but Iscan and Iexscan (which
// MPI defines on intracommunicators only) runs the intercommunicator
// algorithm of its blocking form (intercoll.go) the same way.

// start runs a prepared call in a goroutine and returns its request.
func start(c *Comm, op string, v coll.Comm, cl call, err error) (*Request, error) {
	if err != nil {
		v.Abort(int(classOf(err)), err)
		return nil, err
	}
	cl.args.Nonblocking = true
	cl.args.ShmReady = v.ShmReady() // as the call begins: coll's nbturn.go
	return launch(c, op, v, true, func(v *coll.Comm) error { return wrapColl(op, cl.fn(v, &cl.args)) })
}

// launch posts the notice receive of the begun view v and returns its
// request at once; run runs on v in a goroutine, whose failure aborts the
// call and becomes the request's error, and which then sends the notice.
// turn: v was begun just now, in the communicator's order of calls, and
// takes its turn among them (coll's Launched; not a persistent call's
// view, begun at its Init and started in any order).
func launch(c *Comm, op string, v coll.Comm, turn bool, run func(v *coll.Comm) error) (*Request, error) {
	done, perr := v.PostNotify()
	if perr != nil {
		return nil, wrap(op, perr)
	}
	var res collResult
	ended := make(chan struct{})
	q := &Request{r: done, c: c, op: op, elem: 1, own: true, ended: ended}
	q.post = func(_ Status, err error) error {
		if e := res.get(); e != nil {
			return e
		}
		return err
	}
	eng := c.rt.eng
	eng.Helping()
	if turn {
		v.Launched()
	}
	c.rt.helpers.run(func() {
		defer eng.Helped()
		e := run(&v)
		if e != nil {
			v.Abort(int(classOf(e)), e)
			res.set(e)
		}
		if turn {
			v.Landed()
		}
		if nerr := v.Notify(); nerr != nil {
			res.set(wrap(op, nerr))
		}
		close(ended)
	})
	return q, nil
}

// collResult is the outcome of a call's goroutine.
type collResult struct {
	mu  sync.Mutex
	err error
}

func (r *collResult) set(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

func (r *collResult) get() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Ibarrier starts a barrier: the request completes once every rank of c
// has started its Ibarrier (or Barrier).
func Ibarrier(c *Comm) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interBarrier("Ibarrier", c))
	}
	v, err := c.begin("Ibarrier")
	if err != nil {
		return nil, err
	}
	return start(c, "Ibarrier", v, call{fn: barrierFn}, nil)
}

// Ibcast is the nonblocking Bcast.
func Ibcast[T Element](c *Comm, buf []T, root int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interBcast("Ibcast", c, buf, root))
	}
	v, err := c.begin("Ibcast")
	if err != nil {
		return nil, err
	}
	var cl call
	err = bcastCall("Ibcast", c, buf, root, &cl)
	return start(c, "Ibcast", v, cl, err)
}

// Ireduce is the nonblocking Reduce.
func Ireduce[T Element](c *Comm, sendbuf, recvbuf []T, op Op, root int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interReduce("Ireduce", c, sendbuf, recvbuf, op, root))
	}
	v, err := c.begin("Ireduce")
	if err != nil {
		return nil, err
	}
	var cl call
	err = reduceCall("Ireduce", c, sendbuf, recvbuf, op, root, &cl)
	return start(c, "Ireduce", v, cl, err)
}

// Iallreduce is the nonblocking Allreduce.
func Iallreduce[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interAllreduce("Iallreduce", c, sendbuf, recvbuf, op))
	}
	v, err := c.begin("Iallreduce")
	if err != nil {
		return nil, err
	}
	var cl call
	err = reductionCall("Iallreduce", coll.Allreduce, sendbuf, recvbuf, op, &cl)
	return start(c, "Iallreduce", v, cl, err)
}

// Iscan is the nonblocking Scan.
func Iscan[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	v, err := c.begin("Iscan")
	if err != nil {
		return nil, err
	}
	var cl call
	err = reductionCall("Iscan", coll.Scan, sendbuf, recvbuf, op, &cl)
	return start(c, "Iscan", v, cl, err)
}

// Iexscan is the nonblocking Exscan.
func Iexscan[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	v, err := c.begin("Iexscan")
	if err != nil {
		return nil, err
	}
	var cl call
	err = reductionCall("Iexscan", coll.Exscan, sendbuf, recvbuf, op, &cl)
	return start(c, "Iexscan", v, cl, err)
}

// Igather is the nonblocking Gather.
func Igather[T Element](c *Comm, sendbuf, recvbuf []T, root int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interGather("Igather", c, sendbuf, recvbuf, root))
	}
	v, err := c.begin("Igather")
	if err != nil {
		return nil, err
	}
	var cl call
	err = gatherCall("Igather", c, sendbuf, recvbuf, root, &cl)
	return start(c, "Igather", v, cl, err)
}

// Igatherv is the nonblocking Gatherv.
func Igatherv[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int, root int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interGatherv("Igatherv", c, sendbuf, recvbuf, counts, displs, root))
	}
	v, err := c.begin("Igatherv")
	if err != nil {
		return nil, err
	}
	var cl call
	err = gathervCall("Igatherv", c, sendbuf, recvbuf, counts, displs, root, &cl)
	return start(c, "Igatherv", v, cl, err)
}

// Iscatter is the nonblocking Scatter.
func Iscatter[T Element](c *Comm, sendbuf, recvbuf []T, root int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interScatter("Iscatter", c, sendbuf, recvbuf, root))
	}
	v, err := c.begin("Iscatter")
	if err != nil {
		return nil, err
	}
	var cl call
	err = scatterCall("Iscatter", c, sendbuf, recvbuf, root, &cl)
	return start(c, "Iscatter", v, cl, err)
}

// Iscatterv is the nonblocking Scatterv.
func Iscatterv[T Element](c *Comm, sendbuf []T, counts, displs []int, recvbuf []T, root int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interScatterv("Iscatterv", c, sendbuf, counts, displs, recvbuf, root))
	}
	v, err := c.begin("Iscatterv")
	if err != nil {
		return nil, err
	}
	var cl call
	err = scattervCall("Iscatterv", c, sendbuf, counts, displs, recvbuf, root, &cl)
	return start(c, "Iscatterv", v, cl, err)
}

// Iallgather is the nonblocking Allgather.
func Iallgather[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interAllgather("Iallgather", c, sendbuf, recvbuf))
	}
	v, err := c.begin("Iallgather")
	if err != nil {
		return nil, err
	}
	var cl call
	err = allgatherCall("Iallgather", c, sendbuf, recvbuf, &cl)
	return start(c, "Iallgather", v, cl, err)
}

// Iallgatherv is the nonblocking Allgatherv.
func Iallgatherv[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interAllgatherv("Iallgatherv", c, sendbuf, recvbuf, counts, displs))
	}
	v, err := c.begin("Iallgatherv")
	if err != nil {
		return nil, err
	}
	var cl call
	err = allgathervCall("Iallgatherv", c, sendbuf, recvbuf, counts, displs, &cl)
	return start(c, "Iallgatherv", v, cl, err)
}

// Ialltoall is the nonblocking Alltoall.
func Ialltoall[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interAlltoall("Ialltoall", c, sendbuf, recvbuf))
	}
	v, err := c.begin("Ialltoall")
	if err != nil {
		return nil, err
	}
	var cl call
	err = alltoallCall("Ialltoall", c, sendbuf, recvbuf, &cl)
	return start(c, "Ialltoall", v, cl, err)
}

// Ialltoallv is the nonblocking Alltoallv.
func Ialltoallv[T Element](c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interAlltoallv("Ialltoallv", c, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls))
	}
	v, err := c.begin("Ialltoallv")
	if err != nil {
		return nil, err
	}
	var cl call
	err = alltoallvCall("Ialltoallv", c, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &cl)
	return start(c, "Ialltoallv", v, cl, err)
}

// IreduceScatter is the nonblocking ReduceScatter.
func IreduceScatter[T Element](c *Comm, sendbuf, recvbuf []T, recvcounts []int, op Op) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interReduceScatter("IreduceScatter", c, sendbuf, recvbuf, recvcounts, op))
	}
	v, err := c.begin("IreduceScatter")
	if err != nil {
		return nil, err
	}
	var cl call
	err = reduceScatterCall("IreduceScatter", c, sendbuf, recvbuf, recvcounts, op, &cl)
	return start(c, "IreduceScatter", v, cl, err)
}

// IreduceScatterBlock is the nonblocking ReduceScatterBlock.
func IreduceScatterBlock[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	if c.IsInter() {
		return c.interStart(interReduceScatterBlock("IreduceScatterBlock", c, sendbuf, recvbuf, op))
	}
	v, err := c.begin("IreduceScatterBlock")
	if err != nil {
		return nil, err
	}
	var cl call
	err = reduceScatterBlockCall("IreduceScatterBlock", c, sendbuf, recvbuf, op, &cl)
	return start(c, "IreduceScatterBlock", v, cl, err)
}
