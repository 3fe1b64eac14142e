package collsoak

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

// runOne makes blocking call k at this rank of c (on device twins on
// dev >= 0) and checks it.
func runOne(c *mpi.Comm, k *call, dev int) error {
	if k.float {
		return runOneT[float64](c, k, dev)
	}
	return runOneT[int64](c, k, dev)
}

func runOneT[T elem](c *mpi.Comm, k *call, dev int) error {
	p, err := planOf[T](c, k, false)
	if err != nil {
		return err
	}
	return p.run(c, dev)
}

// run makes p's blocking call on c and checks it.
func (p *plan[T]) run(c *mpi.Comm, dev int) error {
	start, finish, check, err := p.prepare(c, dev)
	if err != nil {
		return err
	}
	if _, err := start(); err != nil {
		return errors.Join(err, finish())
	}
	if err := finish(); err != nil {
		return err
	}
	return check()
}

// prepare is exec, and what checks the result and that the call wrote
// nothing where it must not (untouched), once finish has run.
func (p *plan[T]) prepare(c *mpi.Comm, dev int) (start func() (*mpi.Request, error), finish, check func() error, err error) {
	if start, finish, err = p.exec(c, dev); err != nil {
		return nil, nil, nil, err
	}
	untouched := p.untouched()
	return start, finish, func() error { return errors.Join(p.check(), untouched()) }, nil
}

// runPersistent makes call k persistent at this rank (its XInit, on host
// memory) and runs it runs times, each run with other inputs in the same
// buffers, checking every result.
func runPersistent(c *mpi.Comm, k *call, runs int) error {
	if k.float {
		return runPersistentT[float64](c, k, runs)
	}
	return runPersistentT[int64](c, k, runs)
}

func runPersistentT[T elem](c *mpi.Comm, k *call, runs int) error {
	p, err := planOf[T](c, k, false)
	if err != nil {
		return err
	}
	req, err := p.hostInit(c)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	for run := range runs {
		if run > 0 {
			// The next run's inputs and expectations, in the buffers
			// the request holds (same counts: they do not vary by run).
			k2 := *k
			k2.run = run
			q, err := planOf[T](c, &k2, false)
			if err != nil {
				return err
			}
			copy(p.send, q.send)
			copy(p.recv, q.recv)
			q.send, q.recv = p.send, p.recv
			p.check = q.check
		}
		untouched := p.untouched()
		if err := req.Start(); err != nil {
			return fmt.Errorf("run %d: start: %w", run, err)
		}
		if _, err := req.Wait(); err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		if err := errors.Join(p.check(), untouched()); err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
	}
	return req.Free()
}

// hostInit makes p's call persistent (MPI_X_init) on its host buffers.
func (p *plan[T]) hostInit(c *mpi.Comm) (*mpi.Request, error) {
	switch p.kind {
	case "barrier":
		return mpi.BarrierInit(c)
	case "bcast":
		return mpi.BcastInit(c, p.recv, p.root)
	case "reduce":
		return mpi.ReduceInit(c, p.send, p.recv, p.op, p.root)
	case "allreduce":
		return mpi.AllreduceInit(c, p.send, p.recv, p.op)
	case "scan":
		return mpi.ScanInit(c, p.send, p.recv, p.op)
	case "exscan":
		return mpi.ExscanInit(c, p.send, p.recv, p.op)
	case "allgather":
		return mpi.AllgatherInit(c, p.send, p.recv)
	case "gather":
		return mpi.GatherInit(c, p.send, p.recv, p.root)
	case "scatter":
		return mpi.ScatterInit(c, p.send, p.recv, p.root)
	case "alltoall":
		return mpi.AlltoallInit(c, p.send, p.recv)
	case "reduce_scatter_block":
		return mpi.ReduceScatterBlockInit(c, p.send, p.recv, p.op)
	case "reduce_scatter":
		return mpi.ReduceScatterInit(c, p.send, p.recv, p.counts, p.op)
	case "allgatherv":
		return mpi.AllgathervInit(c, p.send, p.recv, p.counts, p.displs)
	case "gatherv":
		return mpi.GathervInit(c, p.send, p.recv, p.counts, p.displs, p.root)
	case "scatterv":
		return mpi.ScattervInit(c, p.send, p.counts, p.displs, p.recv, p.root)
	case "alltoallv":
		return mpi.AlltoallvInit(c, p.send, p.sc, p.sd, p.recv, p.rc, p.rd)
	}
	return nil, fmt.Errorf("collsoak: no persistent call %q", p.kind)
}

// burst starts nb nonblocking calls drawn after k (each a few KiB at
// most: they are in flight together), half of the time makes a blocking
// call while they are in flight (MPI orders it after them: the blocking
// algorithms, in shared memory too, run beside their goroutines), waits
// for them together and checks each.
func burst(c *mpi.Comm, k *call, rng *rand.Rand, nb, dev int, count map[string]int) error {
	subs := make([]call, nb)
	for j := range subs {
		s := draw(rng, 0, 16<<10, 0, dev >= 0)
		s.comm, s.step = k.comm, k.step*8+j+1<<30 // inputs of their own
		s.kind = nbKinds[rng.IntN(len(nbKinds))]
		subs[j] = s
	}
	var mid *call
	if rng.IntN(2) == 0 {
		m := drawBlocking(rng, k.step*8+7+1<<30, k.comm, dev >= 0)
		mid = &m
	}
	reqs := make([]*mpi.Request, 0, nb)
	var checks, finishes []func() error
	waited := false
	defer func() {
		// On an error, the calls started must end before their device
		// buffers are freed.
		if !waited {
			mpi.Waitall(reqs)
		}
		for _, f := range finishes {
			f()
		}
	}()
	for j := range subs {
		s := &subs[j]
		start, finish, check, err := planExec(c, s, dev)
		if err != nil {
			return fmt.Errorf("%v (in a burst): %w", s, err)
		}
		finishes = append(finishes, finish)
		r, err := start()
		if err != nil {
			return fmt.Errorf("%v (in a burst): start: %w", s, err)
		}
		reqs, checks = append(reqs, r), append(checks, check)
	}
	if mid != nil {
		if err := runOne(c, mid, dev); err != nil {
			return fmt.Errorf("%v (while a burst is in flight): %w", mid, err)
		}
		count[mid.kind]++
	}
	_, err := mpi.Waitall(reqs)
	waited = true
	if err != nil {
		return fmt.Errorf("call %d: a burst of %d nonblocking calls: %w", k.step, nb, err)
	}
	for j, check := range checks {
		f := finishes[j]
		finishes[j] = func() error { return nil }
		if err := f(); err != nil {
			return fmt.Errorf("%v (in a burst): %w", &subs[j], err)
		}
		if err := check(); err != nil {
			return fmt.Errorf("%v (in a burst): %w", &subs[j], err)
		}
		count[subs[j].kind]++
	}
	return nil
}

// planExec is planOf and exec of a nonblocking call of the element type k
// draws.
func planExec(c *mpi.Comm, k *call, dev int) (start func() (*mpi.Request, error), finish, check func() error, err error) {
	if k.float {
		return planExecT[float64](c, k, dev)
	}
	return planExecT[int64](c, k, dev)
}

func planExecT[T elem](c *mpi.Comm, k *call, dev int) (start func() (*mpi.Request, error), finish, check func() error, err error) {
	p, err := planOf[T](c, k, true)
	if err != nil {
		return nil, nil, nil, err
	}
	return p.prepare(c, dev)
}

// exec returns what starts p (a blocking call runs and returns a nil
// request) and what ends it: on host memory (dev < 0) nothing; on device
// dev, p's buffers have device twins, which finish copies back into
// p's buffers and frees.
func (p *plan[T]) exec(c *mpi.Comm, dev int) (start func() (*mpi.Request, error), finish func() error, err error) {
	if dev < 0 {
		return func() (*mpi.Request, error) { return p.host(c) }, func() error { return nil }, nil
	}
	d, err := p.twins(dev)
	if err != nil {
		return nil, nil, err
	}
	return func() (*mpi.Request, error) { return p.device(c, d) }, d.back, nil
}

// host makes p's call on its host buffers.
func (p *plan[T]) host(c *mpi.Comm) (*mpi.Request, error) {
	var err error
	switch p.kind {
	case "barrier":
		err = mpi.Barrier(c)
	case "ibarrier":
		return mpi.Ibarrier(c)
	case "bcast":
		err = mpi.Bcast(c, p.recv, p.root)
	case "ibcast":
		return mpi.Ibcast(c, p.recv, p.root)
	case "reduce":
		err = mpi.Reduce(c, p.send, p.recv, p.op, p.root)
	case "ireduce":
		return mpi.Ireduce(c, p.send, p.recv, p.op, p.root)
	case "allreduce":
		err = mpi.Allreduce(c, p.send, p.recv, p.op)
	case "iallreduce":
		return mpi.Iallreduce(c, p.send, p.recv, p.op)
	case "scan":
		err = mpi.Scan(c, p.send, p.recv, p.op)
	case "exscan":
		err = mpi.Exscan(c, p.send, p.recv, p.op)
	case "allgather":
		err = mpi.Allgather(c, p.send, p.recv)
	case "iallgather":
		return mpi.Iallgather(c, p.send, p.recv)
	case "gather":
		err = mpi.Gather(c, p.send, p.recv, p.root)
	case "scatter":
		err = mpi.Scatter(c, p.send, p.recv, p.root)
	case "alltoall":
		err = mpi.Alltoall(c, p.send, p.recv)
	case "ialltoall":
		return mpi.Ialltoall(c, p.send, p.recv)
	case "reduce_scatter_block":
		err = mpi.ReduceScatterBlock(c, p.send, p.recv, p.op)
	case "ireduce_scatter_block":
		return mpi.IreduceScatterBlock(c, p.send, p.recv, p.op)
	case "reduce_scatter":
		err = mpi.ReduceScatter(c, p.send, p.recv, p.counts, p.op)
	case "allgatherv":
		err = mpi.Allgatherv(c, p.send, p.recv, p.counts, p.displs)
	case "gatherv":
		err = mpi.Gatherv(c, p.send, p.recv, p.counts, p.displs, p.root)
	case "scatterv":
		err = mpi.Scatterv(c, p.send, p.counts, p.displs, p.recv, p.root)
	case "alltoallv":
		err = mpi.Alltoallv(c, p.send, p.sc, p.sd, p.recv, p.rc, p.rd)
	default:
		err = fmt.Errorf("collsoak: no host call %q", p.kind)
	}
	return nil, err
}

// twins are a plan's device buffers: the zero gpu.Buffer where the call
// is in place (the send buffer, or a scatter root's receive buffer), else
// a device buffer, empty where the host one is nil (the zero Buffer would
// say "in place": an empty send of alltoallv took the receive layout).
type twins struct {
	send, recv gpu.Buffer
	back       func() error
}

// twin is a device copy of b (one element at least, so that an empty
// buffer is not the zero Buffer, which means in place).
func twin[T elem](dev int, b []T) (gpu.Buffer, error) {
	dt := gpu.Int64
	if _, ok := any(b).([]float64); ok {
		dt = gpu.Float64
	}
	d, err := gpu.Alloc(dev, dt, max(len(b), 1))
	if err != nil {
		return gpu.Buffer{}, err
	}
	d = d.Slice(0, len(b))
	if len(b) > 0 {
		if err := gpu.Upload(d, b); err != nil {
			d.Free()
			return gpu.Buffer{}, err
		}
	}
	return d, nil
}

func (p *plan[T]) twins(dev int) (*twins, error) {
	d := &twins{}
	var err error
	if p.alias == aliasNone || p.alias == aliasRecvIn {
		if d.send, err = twin(dev, p.send); err != nil {
			return nil, err
		}
	}
	if p.alias != aliasRecvIn {
		if d.recv, err = twin(dev, p.recv); err != nil {
			d.send.Free()
			return nil, err
		}
	}
	d.back = func() error {
		var errs []error
		for _, x := range []struct {
			d gpu.Buffer
			h []T
		}{{d.recv, p.recv}, {d.send, p.send}} {
			if x.d == (gpu.Buffer{}) {
				continue
			}
			if len(x.h) > 0 {
				errs = append(errs, gpu.Download(x.h, x.d))
			}
			errs = append(errs, x.d.Free())
		}
		return errors.Join(errs...)
	}
	return d, nil
}

// device makes p's call on its device twins d.
func (p *plan[T]) device(c *mpi.Comm, d *twins) (*mpi.Request, error) {
	var err error
	s, r := d.send, d.recv
	switch p.kind {
	case "barrier":
		err = mpi.Barrier(c)
	case "ibarrier":
		return mpi.Ibarrier(c)
	case "bcast":
		err = mpi.BcastGPU(c, r, p.root)
	case "ibcast":
		return mpi.IbcastGPU(c, r, p.root)
	case "reduce":
		err = mpi.ReduceGPU(c, s, r, p.op, p.root)
	case "ireduce":
		return mpi.IreduceGPU(c, s, r, p.op, p.root)
	case "allreduce":
		err = mpi.AllreduceGPU(c, s, r, p.op)
	case "iallreduce":
		return mpi.IallreduceGPU(c, s, r, p.op)
	case "scan":
		err = mpi.ScanGPU(c, s, r, p.op)
	case "exscan":
		err = mpi.ExscanGPU(c, s, r, p.op)
	case "allgather":
		err = mpi.AllgatherGPU(c, s, r)
	case "iallgather":
		return mpi.IallgatherGPU(c, s, r)
	case "gather":
		err = mpi.GatherGPU(c, s, r, p.root)
	case "scatter":
		err = mpi.ScatterGPU(c, s, r, p.root)
	case "alltoall":
		err = mpi.AlltoallGPU(c, s, r)
	case "ialltoall":
		return mpi.IalltoallGPU(c, s, r)
	case "reduce_scatter_block":
		err = mpi.ReduceScatterBlockGPU(c, s, r, p.op)
	case "ireduce_scatter_block":
		return mpi.IreduceScatterBlockGPU(c, s, r, p.op)
	case "reduce_scatter":
		err = mpi.ReduceScatterGPU(c, s, r, p.counts, p.op)
	case "allgatherv":
		err = mpi.AllgathervGPU(c, s, r, p.counts, p.displs)
	case "gatherv":
		err = mpi.GathervGPU(c, s, r, p.counts, p.displs, p.root)
	case "scatterv":
		err = mpi.ScattervGPU(c, s, p.counts, p.displs, r, p.root)
	case "alltoallv":
		err = mpi.AlltoallvGPU(c, s, p.sc, p.sd, r, p.rc, p.rd)
	default:
		err = fmt.Errorf("collsoak: no device call %q", p.kind)
	}
	return nil, err
}
