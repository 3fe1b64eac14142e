package coll

import "github.com/gorun/gorun/gpu"

// The GPU v forms (Allgatherv, Gatherv, Scatterv, Alltoallv) and scans
// (Scan, Exscan). The v forms run the equal-block algorithms of
// gpualg.go, which take their block offsets from a.Displs where it is set
// (displsOf); the scans are a linear chain. Both are the simple correct
// choice over device point-to-point, so that no call on device memory is
// unsupported; none is measured against a reference yet.

// displsOf is the byte offset of each block of a.Counts: a.Displs for the
// v forms, consecutive blocks otherwise.
func displsOf(a *Args) []int {
	if a.Displs != nil {
		return a.Displs
	}
	return evenDispls(a.Counts)
}

// gpuCallAll runs a GPU collective whose first algorithm also serves a
// communicator of one rank: gpuCall's plain copy would not put a v form's
// block at its displacement, and Exscan leaves rank 0's output alone.
func gpuCallAll(k *collective, c *Comm, a *Args) error {
	if c.Size() > 1 {
		return k.call(c, a, nil)
	}
	if err := c.Poll(); err != nil {
		return err
	}
	return k.algs[0].run(c, a)
}

// gpuScanLinear: rank r receives x0 op ... op x(r-1) from rank r-1, folds
// its own input in (so every prefix is reduced in rank order, as the
// reference is) and passes the result on to rank r+1. n-1 sequential
// steps: the latency is n transfers, fine for the sizes scans are used at.
func gpuScanLinear(c *Comm, a *Args, d *devCall) error {
	n, me := c.Size(), c.Rank()
	var p pending
	if me == 0 {
		if err := d.copy(d.rcv, d.own); err != nil {
			return err
		}
	} else {
		tmp, err := d.recvPrev(c, &p, d.rcv.Len())
		if err != nil {
			return err
		}
		// In place d.own is d.rcv: the kernel reads each element before
		// writing it.
		if err := d.reduce(d.rcv, tmp, d.own); err != nil {
			return err
		}
	}
	// The next rank's copy engine reads d.rcv.
	if err := d.sync(); err != nil {
		return err
	}
	if me+1 < n {
		if err := p.sendD(c, d.rcv, me+1); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// gpuExscanLinear: as gpuScanLinear, but rank r keeps what it received
// (x0 op ... op x(r-1)) and passes that op x(r) on; rank 0's output is
// not written.
func gpuExscanLinear(c *Comm, a *Args, d *devCall) error {
	n, me := c.Size(), c.Rank()
	size := d.own.Len()
	var p pending
	if me == 0 {
		if n > 1 {
			if err := p.sendD(c, d.own, 1); err != nil {
				return err
			}
		}
		return p.wait(c)
	}
	tmp, err := d.recvPrev(c, &p, size)
	if err != nil {
		return err
	}
	var next gpu.Buffer
	if me+1 < n {
		// Reduced before the copy below: in place, that copy overwrites
		// this rank's input.
		if next, err = d.take(size); err != nil {
			return err
		}
		if err := d.reduce(next, tmp, d.own); err != nil {
			return err
		}
	}
	if err := d.copy(d.rcv, tmp); err != nil {
		return err
	}
	if err := d.sync(); err != nil {
		return err
	}
	if me+1 < n {
		if err := p.sendD(c, next, me+1); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// AllgathervGPU is AllgatherGPU with blocks of a.Counts[r] bytes at
// a.Displs[r] of a.RecvD (the same at every rank); a.SendD zero: in place,
// this rank's block already at its place.
func AllgathervGPU(c *Comm, a *Args) error { return gpuCallAll(collGPUAllgatherv, c, a) }

// GathervGPU collects every rank's a.SendD into the root's a.RecvD at
// a.Displs[r] (a.Counts[r] bytes; both read at the root only); the root's
// a.SendD may be zero (in place).
func GathervGPU(c *Comm, a *Args) error { return gpuCallAll(collGPUGatherv, c, a) }

// ScattervGPU sends a.Counts[r] bytes at a.Displs[r] of the root's a.SendD
// to rank r's a.RecvD; the root's a.RecvD may be zero (in place).
func ScattervGPU(c *Comm, a *Args) error { return gpuCallAll(collGPUScatterv, c, a) }

// AlltoallvGPU sends a.SendCounts[r] bytes at a.SendDispls[r] of a.SendD
// to rank r, which puts them at a.Displs[r'] (a.Counts[r'] bytes, r' the
// sender) of its a.RecvD. In place (a.SendD zero; the send layout is the
// receive layout) through a scratch copy of a.RecvD.
func AlltoallvGPU(c *Comm, a *Args) error {
	return alltoallDevInPlace(c, a, func(c *Comm, a *Args) error { return gpuCallAll(collGPUAlltoallv, c, a) })
}

// ScanGPU leaves x0 op ... op xr (a.SendD, or a.RecvD in place, with
// a.DOp) in rank r's a.RecvD.
func ScanGPU(c *Comm, a *Args) error { return gpuCallAll(collGPUScan, c, a) }

// ExscanGPU leaves x0 op ... op x(r-1) in rank r's a.RecvD; rank 0's is
// not written.
func ExscanGPU(c *Comm, a *Args) error { return gpuCallAll(collGPUExscan, c, a) }

// recvPrev receives size bytes from the previous rank into a scratch
// buffer and waits for them: the step both scans begin with.
func (d *devCall) recvPrev(c *Comm, p *pending, size int) (gpu.Buffer, error) {
	tmp, err := d.take(size)
	if err != nil {
		return gpu.Buffer{}, err
	}
	if err := p.recvD(c, tmp, c.Rank()-1); err != nil {
		return gpu.Buffer{}, err
	}
	return tmp, p.wait(c)
}
