package coll

// Scan: a.Recv at rank r receives x0 ⊕ x1 ⊕ ... ⊕ xr; Exscan: x0 ⊕ ... ⊕
// x(r-1), nothing at rank 0 (its a.Recv is left as it was). a.Send is this
// rank's contribution, nil for in place (it is in a.Recv).

// scanLinear: a chain: rank r waits for the prefix of the ranks below,
// folds its own contribution in and passes the result on. n-1 latencies
// end to end; any operation.
func scanLinear(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	a.seedRecv()
	if me > 0 {
		tmp := getBuf(len(a.Recv))
		defer putBufOK(tmp, &err)
		if err := c.recv(tmp, me-1); err != nil {
			return err
		}
		a.Op.Apply(tmp, a.Recv)
	}
	if me < n-1 {
		return c.send(a.Recv, me+1)
	}
	return nil
}

// scanRecursiveDoubling: log2(n) exchanges at distance 1, 2, 4...; each
// rank keeps the reduction of its aligned group (to pass on) and of the
// lower ranks (its result). Any operation.
func scanRecursiveDoubling(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	a.seedRecv()
	m := len(a.Recv)
	part := getBuf(m)
	defer putBufOK(part, &err)
	copy(part, a.Recv)
	tmp := getBuf(m)
	defer putBufOK(tmp, &err)
	for d := 1; d < n; d <<= 1 {
		peer := me ^ d
		if peer >= n {
			continue
		}
		if err := c.sendrecv(part, peer, tmp, peer); err != nil {
			return err
		}
		if peer < me {
			a.Op.Apply(tmp, part)
			a.Op.Apply(tmp, a.Recv)
		} else {
			foldInto(a.Op, part, tmp)
		}
	}
	return nil
}

// exscanLinear: the chain of scanLinear, each rank keeping what it
// received.
func exscanLinear(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	own := a.own()
	m := len(own)
	if me == 0 {
		return c.send(own, 1)
	}
	acc := own
	if me < n-1 {
		acc = getBuf(m)
		defer putBufOK(acc, &err)
		copy(acc, own)
	}
	if err := c.recv(a.Recv[:m], me-1); err != nil {
		return err
	}
	if me < n-1 {
		a.Op.Apply(a.Recv[:m], acc)
		return c.send(acc, me+1)
	}
	return nil
}

// exscanRecursiveDoubling: scanRecursiveDoubling without the own
// contribution in the result. Any operation.
func exscanRecursiveDoubling(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	own := a.own()
	m := len(own)
	part := getBuf(m)
	defer putBufOK(part, &err)
	copy(part, own)
	tmp := getBuf(m)
	defer putBufOK(tmp, &err)
	have := false
	for d := 1; d < n; d <<= 1 {
		peer := me ^ d
		if peer >= n {
			continue
		}
		if err := c.sendrecv(part, peer, tmp, peer); err != nil {
			return err
		}
		if peer < me {
			a.Op.Apply(tmp, part)
			if have {
				a.Op.Apply(tmp, a.Recv[:m])
			} else {
				copy(a.Recv[:m], tmp)
				have = true
			}
		} else {
			foldInto(a.Op, part, tmp)
		}
	}
	return nil
}
