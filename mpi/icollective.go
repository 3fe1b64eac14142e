package mpi

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gorun/gorun/coll"
	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/p2p"
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
// among the communicator's calls: coll's nbturn.go), polling the
// transports as any blocking call does, and at its end sends a zero-byte
// notice to this rank itself, which completes the Request's receive.
// The call is deferred (launch): the process's next wait, Test, Testall,
// Testany, Testsome, Iprobe or Improbe (p2p's Engine.Defer) hands it to
// a goroutine of the process's pool (helpers.go), and a Wait on its own
// request that comes first runs it on the caller's goroutine, with no
// hand-off at all. While a pool goroutine runs one, every wait of the
// process gives way to it (p2p's Engine.Helping), but for the call's own
// when a Wait sleeps for it (Engine.Parked). As in Open MPI, a call
// therefore progresses inside MPI calls only, not beside the caller's
// computation; an MPI program that relies on nonblocking collectives
// progressing independently (Ibarrier, then a synchronous send) cannot
// deadlock, since every wait begins them. GORUN_NB_START=now starts each
// call on a pool goroutine at once instead, for overlap with the
// caller's computation where the rank has CPUs to spare: on the lent
// hosts that was slower by the hand-off, and the overlap varied from
// none to three quarters between runs (docs/measurements.md, "Deferred
// nonblocking calls").
//
// On an intercommunicator every one of them but Iscan and Iexscan (which
// MPI defines on intracommunicators only) runs the intercommunicator
// algorithm of its blocking form (intercoll.go) the same way.

// start runs a prepared call as a nonblocking one and returns its
// request.
func start(c *Comm, op string, v coll.Comm, cl call, err error) (*Request, error) {
	if err != nil {
		v.Abort(int(classOf(err)), err)
		return nil, err
	}
	cl.args.Nonblocking = true
	cl.args.ShmReady = v.ShmReady()   // as the call begins: coll's nbturn.go
	cl.args.Forced = coll.Overrides() // likewise: coll's SetAlgorithm
	return launchOwn(&nbCall{c: c, op: op, v: v, cl: cl})
}

// launchOwn is launch of a call started once, with its own request.
func launchOwn(nc *nbCall) (*Request, error) {
	nc.req = Request{c: nc.c, op: nc.op, elem: 1}
	if err := launch(nc, &nc.req); err != nil {
		return nil, err
	}
	return &nc.req, nil
}

// nbCall is one nonblocking call in flight (a nonblocking collective, a
// persistent collective's run, an Idup): what launch needs, and its
// Request, in one allocation.
type nbCall struct {
	req Request // the call's request; a persistent run reports in its own
	c   *Comm
	op  string
	v   coll.Comm // the begun view the call runs on
	// cl is the call run on v, unless run is set.
	cl  call
	run func(v *coll.Comm) error
	res collResult
	// begun: a helper or the call's Wait has taken the call to run it
	// (take); the other leaves it.
	begun atomic.Bool
	// ended is done once the call has ended and sent its notice; a Wait
	// whose call a helper runs sleeps on it.
	ended sync.WaitGroup
	// queued, next: the call is deferred, in the process's list (rt.nbq,
	// under its lock).
	queued bool
	next   *nbCall
}

var pNBStart = params.String("GORUN_NB_START", "wait",
	"when a nonblocking collective begins: wait (at the process's next wait or test, or in its own Wait, as Open MPI's progress does), now (at once on a helper goroutine, beside the caller's computation where the rank has CPUs to spare: slower by a goroutine hand-off, and the overlap it bought varied from none to three quarters between runs on the lent hosts, docs/measurements.md)")

// nbNow reports whether nonblocking calls begin at once
// (GORUN_NB_START=now), read once: launch asks on every call.
var nbNow = sync.OnceValue(func() bool {
	switch s := pNBStart(); s {
	case "wait":
		return false
	case "now":
		return true
	default:
		fmt.Fprintf(os.Stderr, "gorun: GORUN_NB_START=%q: want wait or now; using wait\n", s)
		return false
	}
})

// turn reports whether the call takes its turn among the communicator's
// calls (coll's Launched): one begun just now, in the communicator's
// order of calls, that may use the segment (Args.ShmReady, set by start
// only: never a persistent call's view, begun at its Init and started in
// any order, nor an Idup's); a point-to-point one need not hold later
// calls back.
func (nc *nbCall) turn() bool { return nc.cl.args.ShmReady }

// launch posts the notice receive of nc's begun view and makes q (nc.req,
// or a persistent request's own) its request; the call is then deferred
// until the process's next wait or test, which hands it to a helper
// goroutine (rt.begin), unless its own Wait comes first and runs it
// itself, with no hand-off (Request.Wait). With GORUN_NB_START=now it
// goes to a helper at once, and a Wait that finds it not begun yet still
// takes it (take). On the lent 16-core host, an Ibarrier and its Wait
// took 0.8-1.0 µs at np=2 deferred against 1.6-2.2 at once (Open MPI
// 0.7-0.8), 1.3-3.5 against 4.1-4.6 at np=8 (2.2-2.3), 1.6 against
// 2.1-2.7 at np=16 (3.4-3.8) (docs/measurements.md, "Deferred
// nonblocking calls").
func launch(nc *nbCall, q *Request) error {
	done, perr := nc.v.PostNotify()
	if perr != nil {
		return wrap(nc.op, perr)
	}
	q.r, q.own, q.nb = done, true, nc
	nc.ended.Add(1)
	if nc.turn() {
		nc.v.Launched()
	}
	s := nc.c.rt
	if nbNow() {
		s.hand(nc)
	} else {
		s.nbq.put(s.eng, nc)
	}
	return nil
}

// exec runs the call: its failure aborts the call and becomes the
// request's error; it then sends the notice that completes the request.
// A panic in it (a user's Op or CopyFunc) still ends the call, as a
// failure, before it goes on up: its turn and its waiters are not left
// behind (a later call on the communicator would wait for the turn
// forever).
func (nc *nbCall) exec() {
	ran := false
	defer func() {
		if !ran {
			e := errorf(ErrOther, nc.op, "the call panicked")
			nc.v.Abort(int(ErrOther), e)
			nc.res.set(e)
		}
		nc.end()
	}()
	var e error
	if nc.run != nil {
		e = nc.run(&nc.v)
	} else {
		e = wrapColl(nc.op, nc.cl.fn(&nc.v, &nc.cl.args))
	}
	if e != nil {
		nc.v.Abort(int(classOf(e)), e)
		nc.res.set(e)
	}
	ran = true
}

// end is the end of exec: the turn given back, the notice sent, the
// waiters woken.
func (nc *nbCall) end() {
	if nc.turn() {
		nc.v.Landed()
	}
	if nerr := nc.v.Notify(); nerr != nil {
		nc.res.set(wrap(nc.op, nerr))
	}
	nc.ended.Done()
}

// take reports whether the caller is the one to run nc: the first of
// its helper and its Wait to ask.
func (nc *nbCall) take() bool { return nc.begun.CompareAndSwap(false, true) }

// work runs the call on a helper goroutine (hand), unless its Wait took
// it first.
func (nc *nbCall) work() {
	if nc.take() {
		nc.exec()
	}
	nc.c.rt.eng.Helped()
}

// hand runs nc on a helper goroutine; while it runs, the process's waits
// give way to it (p2p's Engine.Helping).
func (s *rt) hand(nc *nbCall) {
	s.eng.Helping()
	s.helpers.run(nc)
}

// nbQueue holds the calls launched and deferred, first launched first.
type nbQueue struct {
	mu         sync.Mutex
	head, tail *nbCall
}

// put defers nc, counted in e's deferred calls (p2p's Engine.Defer).
func (l *nbQueue) put(e *p2p.Engine, nc *nbCall) {
	l.mu.Lock()
	nc.queued = true
	if l.tail == nil {
		l.head = nc
	} else {
		l.tail.next = nc
	}
	l.tail = nc
	e.Defer(1)
	l.mu.Unlock()
}

// claim takes nc out of the list for its caller to run, and reports
// whether it was still there (not begun).
func (l *nbQueue) claim(e *p2p.Engine, nc *nbCall) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !nc.queued {
		return false
	}
	var prev *nbCall
	for x := l.head; x != nc; x = x.next {
		prev = x
	}
	if prev == nil {
		l.head = nc.next
	} else {
		prev.next = nc.next
	}
	if l.tail == nc {
		l.tail = prev
	}
	nc.queued, nc.next = false, nil
	nc.begun.Store(true)
	e.Defer(-1)
	return true
}

// begin hands every deferred call to a helper, first launched first
// (the process's starter: p2p's SetStarter).
func (s *rt) begin() {
	l := &s.nbq
	l.mu.Lock()
	nc := l.head
	l.head, l.tail = nil, nil
	n := int32(0)
	for x := nc; x != nil; x = x.next {
		x.queued = false
		n++
	}
	if n > 0 {
		s.eng.Defer(-n)
	}
	l.mu.Unlock()
	for nc != nil {
		next := nc.next
		nc.next = nil
		s.hand(nc)
		nc = next
	}
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
