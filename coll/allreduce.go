package coll

// Allreduce algorithms: a.Send is this rank's contribution (nil: in
// place, it is in a.Recv), a.Recv the result at every rank.

// allreduceReduceBcast: an order-preserving reduce to rank 0, then a
// binomial broadcast. Any operation; 2 log2(n) latencies.
func allreduceReduceBcast(c *Comm, a *Args) error {
	ra := *a
	ra.Root = 0
	var err error
	if a.commutative() {
		err = reduceBinomial(c, &ra)
	} else {
		err = reduceOrdered(c, &ra)
	}
	if err != nil {
		return err
	}
	return bcastBinomial(c, &Args{Recv: a.Recv, Root: 0})
}

// allreduceRecursiveDoubling: log2(n) rounds of whole-buffer exchanges
// at distance 1, 2, 4... within a power-of-two core (the extra ranks fold
// in first and get the result last). Each fold keeps rank order, so any
// operation works; best for small buffers.
func allreduceRecursiveDoubling(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	a.seedRecv()
	work := a.Recv
	m := len(work)
	tmp := getBuf(m)
	defer putBufOK(tmp, &err)
	f := newFold(n)
	v := f.vrank(me)
	if me < 2*f.rem {
		if v < 0 {
			if err := c.send(work, me+1); err != nil {
				return err
			}
			return c.recv(work, me+1)
		}
		if err := c.recv(tmp, me-1); err != nil {
			return err
		}
		a.Op.Apply(tmp, work)
	}
	for d := 1; d < f.p; d <<= 1 {
		pv := v ^ d
		peer := f.real(pv)
		if err := c.sendrecv(work, peer, tmp, peer); err != nil {
			return err
		}
		if pv < v {
			a.Op.Apply(tmp, work)
		} else {
			foldInto(a.Op, work, tmp)
		}
	}
	if me < 2*f.rem {
		return c.send(work, me-1)
	}
	return nil
}

// allreduceRing: a ring reduce-scatter over n blocks, then a ring
// allgather: 2(n-1) steps, each rank sending 2(n-1)/n of the buffer, the
// bandwidth-optimal choice for large buffers. Commutative operations only.
func allreduceRing(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	counts, displs := blocks(len(a.Recv), n, a.Elem)
	tmp := getBuf(counts[0])
	defer putBufOK(tmp, &err)
	// With a separate send buffer the reduce-scatter folds straight from
	// it (runSteps' own), sparing a copy of the whole buffer.
	if err := runSteps(c, ringReduceScatter(me, n, 0), a.Recv, counts, displs, a.Op, tmp, a.Send); err != nil {
		return err
	}
	return runSteps(c, ringAllgather(me, n, 1), a.Recv, counts, displs, nil, nil, nil)
}

// allreduceRabenseifner: a recursive-halving reduce-scatter then a
// recursive-doubling allgather within a power-of-two core: 2 log2(p)
// rounds moving 2(p-1)/p of the buffer. Commutative operations only.
func allreduceRabenseifner(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	work := a.Recv
	own := a.Send // nil in place: work holds it
	m := len(work)
	tmp := getBuf(m)
	defer putBufOK(tmp, &err)
	f := newFold(n)
	v := f.vrank(me)
	if me < 2*f.rem {
		if v < 0 {
			if err := c.send(a.own(), me+1); err != nil {
				return err
			}
			return c.recv(work, me+1)
		}
		if err := c.recv(tmp, me-1); err != nil {
			return err
		}
		if own != nil {
			fold3(a.Op, tmp, own, work)
			own = nil
		} else {
			a.Op.Apply(tmp, work)
		}
	}
	counts, displs := blocks(m, f.p, a.Elem)
	if err := runSteps(c, f.halving(v), work, counts, displs, a.Op, tmp, own); err != nil {
		return err
	}
	if err := runSteps(c, f.doubling(v), work, counts, displs, nil, nil, nil); err != nil {
		return err
	}
	if me < 2*f.rem {
		return c.send(work, me-1)
	}
	return nil
}

// allreduceHier: each node reduces to its leader, the leaders allreduce,
// and each leader broadcasts on its node; every level uses the flat
// algorithm the table picks for it. Commutative operations only.
func allreduceHier(c *Comm, a *Args) error {
	h := c.hier(0)
	la := *a
	la.Root = 0
	if h.leaders == nil {
		la.Recv = nil
		if a.Send == nil {
			la.Send = a.Recv
		}
	}
	if err := reduceFlat(h.local, &la); err != nil {
		return err
	}
	if h.leaders != nil {
		ga := *a
		ga.Send = nil
		if err := allreduceFlat(h.leaders, &ga); err != nil {
			return err
		}
	}
	return bcastFlat(h.local, &Args{Recv: a.Recv, Root: 0})
}
