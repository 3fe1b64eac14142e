package coll

import "github.com/gorun/gorun/gpu"

// In-place all-to-all and the reduce-scatter with per-rank counts on
// device memory, built on the other GPU collectives.

// isZeroDev reports whether b is the zero gpu.Buffer (in place).
func isZeroDev(b gpu.Buffer) bool { return b.Len() == 0 && b.DType() == 0 }

// alltoallDevInPlace runs the all-to-all run on a. In place (a.SendD zero)
// the blocks to send are read from a scratch copy of a.RecvD while the
// received ones land in a.RecvD; the send layout is then the receive
// layout (MPI_IN_PLACE), which the caller has put in a.
func alltoallDevInPlace(c *Comm, a *Args, run func(*Comm, *Args) error) error {
	if !isZeroDev(a.SendD) {
		return run(c, a)
	}
	if c.Size() == 1 {
		return c.Poll() // the one block stays where it is
	}
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	n := a.RecvD.Len()
	tmp, err := d.take(n)
	if err == nil {
		err = d.copy(tmp, bytesOf(a.RecvD, 0, n))
	}
	if err == nil {
		err = d.sync()
	}
	if err == nil {
		b := *a
		b.SendD = typed(tmp, d.dt, 0, n)
		err = run(c, &b)
	}
	d.done(err)
	return err
}

// ReduceScatterGPU reduces every rank's a.SendD (zero: in place, the input
// in a.RecvD) with a.DOp and leaves block r of the result (a.Counts[r]
// bytes, after the blocks of the ranks before r) at the start of rank r's
// a.RecvD: MPI_Reduce_scatter, the counts per rank. It runs as an
// AllreduceGPU of the whole vector into scratch and a copy of this rank's
// block, which moves about twice the bytes a reduce-scatter needs: an
// algorithm of its own for uneven blocks is not written yet.
func ReduceScatterGPU(c *Comm, a *Args) error {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	total, off := sum(a.Counts), sum(a.Counts[:c.Rank()])
	mine := a.Counts[c.Rank()]
	tmp, err := d.take(total)
	if err == nil {
		b := Args{SendD: typed(d.own, d.dt, 0, total), RecvD: typed(tmp, d.dt, 0, total), DOp: a.DOp, Elem: a.Elem, Nonblocking: a.Nonblocking}
		err = AllreduceGPU(c, &b)
	}
	if err == nil {
		err = d.copy(bytesOf(d.rcv, 0, mine), bytesOf(tmp, off, mine))
	}
	if err == nil {
		err = d.sync()
	}
	d.done(err)
	return err
}
