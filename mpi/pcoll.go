package mpi

import "github.com/gorun/gorun/coll"

// Persistent collectives (MPI-4: MPI_Barrier_init, MPI_Bcast_init, ...).
// Each XxxInit checks its arguments once and returns an inactive
// persistent request; Start (or Startall) runs the collective as its
// nonblocking form would, Wait and the other completion calls end the
// run, and Free releases the request, as for SendInit's requests
// (persistent.go).
//
// The init is a collective call on c, ordered with c's other collectives
// as MPI requires (every process makes its inits in the same order), and
// it takes its place among them once: it reserves the sequence number, and
// so the tags, that every run of the request uses. Runs therefore never
// meet another call's messages, and, as MPI-4 allows, processes may start
// different persistent collectives in different orders, interleaved with
// other collectives as they like. Successive runs of one request reuse its
// tags safely: a process starts run k+1 only after its run k completed,
// and a peer's messages arrive in the order they were sent, so run k's
// receives take run k's messages. Runs use the point-to-point algorithms
// of the nonblocking collectives (not the shared-memory ones), chosen at
// each Start by the same table.
//
// A run that fails aborts the request's call at every process, as a
// failed collective does: that run's and every later run's request fail
// with the error (the reserved tags are closed); Free the request. When
// one process's init fails (bad arguments), the others' inits succeed but
// their runs fail the same way.
//
// On an intercommunicator every init but ScanInit and ExscanInit (MPI
// defines Scan and Exscan on intracommunicators only: ErrComm) prepares
// the intercommunicator algorithm of its blocking form (intercoll.go),
// and each run runs it as the nonblocking form does.

// pcoll is what a persistent collective runs at each Start: the call
// reserved at its init and the prepared arguments.
type pcoll struct {
	v  coll.Comm
	cl call
}

// initColl reserves a call on c for op and prepares it with prep, or on
// an intercommunicator with inter (nil for the collectives MPI defines on
// intracommunicators only: ErrComm).
func initColl(op string, c *Comm, prep func(cl *call) error, inter func() interCall) (*Request, error) {
	var v coll.Comm
	var cl call
	var err error
	if c.IsInter() {
		if inter == nil {
			return nil, c.fail(c.intra(op))
		}
		if v, err = c.interBegin(op); err != nil {
			return nil, c.fail(err)
		}
		ic := inter()
		cl, err = ic.cl, ic.err
	} else {
		if v, err = c.begin(op); err != nil {
			return nil, err // through c's handler in begin
		}
		err = prep(&cl)
	}
	if err != nil {
		v.Abort(int(classOf(err)), err)
		return nil, c.fail(err)
	}
	cl.args.Nonblocking = true
	return &Request{c: c, op: op, elem: 1, fin: true, pers: &persistent{coll: &pcoll{v: v, cl: cl}}}, nil
}

// startColl starts a run of the persistent collective q.
func (q *Request) startColl() error {
	if err := q.c.check(q.op); err != nil {
		return q.c.fail(err)
	}
	p := q.pers.coll
	// Each run its own copy of the call (the algorithms take a pointer)
	// and of the view.
	if err := launch(&nbCall{c: q.c, op: q.op, v: p.v, cl: p.cl}, q); err != nil {
		return q.c.fail(err)
	}
	q.fin, q.st, q.err = false, Status{}, nil
	q.pers.active = true
	return nil
}

// BarrierInit makes a persistent Barrier (MPI_Barrier_init).
func BarrierInit(c *Comm) (*Request, error) {
	return initColl("BarrierInit", c, func(cl *call) error { cl.fn = barrierFn; return nil },
		func() interCall { return interBarrier("BarrierInit", c) })
}

// BcastInit makes a persistent Bcast (MPI_Bcast_init).
func BcastInit[T Element](c *Comm, buf []T, root int) (*Request, error) {
	return initColl("BcastInit", c, func(cl *call) error { return bcastCall("BcastInit", c, buf, root, cl) },
		func() interCall { return interBcast("BcastInit", c, buf, root) })
}

// ReduceInit makes a persistent Reduce (MPI_Reduce_init).
func ReduceInit[T Element](c *Comm, sendbuf, recvbuf []T, op Op, root int) (*Request, error) {
	return initColl("ReduceInit", c, func(cl *call) error { return reduceCall("ReduceInit", c, sendbuf, recvbuf, op, root, cl) },
		func() interCall { return interReduce("ReduceInit", c, sendbuf, recvbuf, op, root) })
}

// AllreduceInit makes a persistent Allreduce (MPI_Allreduce_init).
func AllreduceInit[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	return initColl("AllreduceInit", c, func(cl *call) error {
		return reductionCall("AllreduceInit", coll.Allreduce, sendbuf, recvbuf, op, cl)
	}, func() interCall { return interAllreduce("AllreduceInit", c, sendbuf, recvbuf, op) })
}

// ScanInit makes a persistent Scan (MPI_Scan_init).
func ScanInit[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	return initColl("ScanInit", c, func(cl *call) error { return reductionCall("ScanInit", coll.Scan, sendbuf, recvbuf, op, cl) }, nil)
}

// ExscanInit makes a persistent Exscan (MPI_Exscan_init).
func ExscanInit[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	return initColl("ExscanInit", c, func(cl *call) error { return reductionCall("ExscanInit", coll.Exscan, sendbuf, recvbuf, op, cl) }, nil)
}

// GatherInit makes a persistent Gather (MPI_Gather_init).
func GatherInit[T Element](c *Comm, sendbuf, recvbuf []T, root int) (*Request, error) {
	return initColl("GatherInit", c, func(cl *call) error { return gatherCall("GatherInit", c, sendbuf, recvbuf, root, cl) },
		func() interCall { return interGather("GatherInit", c, sendbuf, recvbuf, root) })
}

// GathervInit makes a persistent Gatherv (MPI_Gatherv_init).
func GathervInit[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int, root int) (*Request, error) {
	return initColl("GathervInit", c, func(cl *call) error {
		return gathervCall("GathervInit", c, sendbuf, recvbuf, counts, displs, root, cl)
	}, func() interCall { return interGatherv("GathervInit", c, sendbuf, recvbuf, counts, displs, root) })
}

// ScatterInit makes a persistent Scatter (MPI_Scatter_init).
func ScatterInit[T Element](c *Comm, sendbuf, recvbuf []T, root int) (*Request, error) {
	return initColl("ScatterInit", c, func(cl *call) error { return scatterCall("ScatterInit", c, sendbuf, recvbuf, root, cl) },
		func() interCall { return interScatter("ScatterInit", c, sendbuf, recvbuf, root) })
}

// ScattervInit makes a persistent Scatterv (MPI_Scatterv_init).
func ScattervInit[T Element](c *Comm, sendbuf []T, counts, displs []int, recvbuf []T, root int) (*Request, error) {
	return initColl("ScattervInit", c, func(cl *call) error {
		return scattervCall("ScattervInit", c, sendbuf, counts, displs, recvbuf, root, cl)
	}, func() interCall { return interScatterv("ScattervInit", c, sendbuf, counts, displs, recvbuf, root) })
}

// AllgatherInit makes a persistent Allgather (MPI_Allgather_init).
func AllgatherInit[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	return initColl("AllgatherInit", c, func(cl *call) error { return allgatherCall("AllgatherInit", c, sendbuf, recvbuf, cl) },
		func() interCall { return interAllgather("AllgatherInit", c, sendbuf, recvbuf) })
}

// AllgathervInit makes a persistent Allgatherv (MPI_Allgatherv_init).
func AllgathervInit[T Element](c *Comm, sendbuf, recvbuf []T, counts, displs []int) (*Request, error) {
	return initColl("AllgathervInit", c, func(cl *call) error {
		return allgathervCall("AllgathervInit", c, sendbuf, recvbuf, counts, displs, cl)
	}, func() interCall { return interAllgatherv("AllgathervInit", c, sendbuf, recvbuf, counts, displs) })
}

// AlltoallInit makes a persistent Alltoall (MPI_Alltoall_init).
func AlltoallInit[T Element](c *Comm, sendbuf, recvbuf []T) (*Request, error) {
	return initColl("AlltoallInit", c, func(cl *call) error { return alltoallCall("AlltoallInit", c, sendbuf, recvbuf, cl) },
		func() interCall { return interAlltoall("AlltoallInit", c, sendbuf, recvbuf) })
}

// AlltoallvInit makes a persistent Alltoallv (MPI_Alltoallv_init).
func AlltoallvInit[T Element](c *Comm, sendbuf []T, sendcounts, sdispls []int, recvbuf []T, recvcounts, rdispls []int) (*Request, error) {
	return initColl("AlltoallvInit", c, func(cl *call) error {
		return alltoallvCall("AlltoallvInit", c, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, cl)
	}, func() interCall {
		return interAlltoallv("AlltoallvInit", c, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls)
	})
}

// ReduceScatterInit makes a persistent ReduceScatter
// (MPI_Reduce_scatter_init).
func ReduceScatterInit[T Element](c *Comm, sendbuf, recvbuf []T, recvcounts []int, op Op) (*Request, error) {
	return initColl("ReduceScatterInit", c, func(cl *call) error {
		return reduceScatterCall("ReduceScatterInit", c, sendbuf, recvbuf, recvcounts, op, cl)
	}, func() interCall { return interReduceScatter("ReduceScatterInit", c, sendbuf, recvbuf, recvcounts, op) })
}

// ReduceScatterBlockInit makes a persistent ReduceScatterBlock
// (MPI_Reduce_scatter_block_init).
func ReduceScatterBlockInit[T Element](c *Comm, sendbuf, recvbuf []T, op Op) (*Request, error) {
	return initColl("ReduceScatterBlockInit", c, func(cl *call) error {
		return reduceScatterBlockCall("ReduceScatterBlockInit", c, sendbuf, recvbuf, op, cl)
	}, func() interCall { return interReduceScatterBlock("ReduceScatterBlockInit", c, sendbuf, recvbuf, op) })
}
