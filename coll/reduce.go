package coll

// Reduce algorithms: a.Send is this rank's contribution (nil at the root
// means in place: it is in a.Recv), a.Recv the root's result (other ranks'
// a.Recv is not used), a.Op the operation, a.Root the root.

// own returns this rank's contribution.
func (a *Args) own() []byte {
	if a.Send == nil {
		return a.Recv
	}
	return a.Send
}

// seedRecv puts this rank's own contribution into a.Recv (unless it is
// there already: in place).
func (a *Args) seedRecv() {
	if a.Send != nil {
		copy(a.Recv, a.Send)
	}
}

// reduceLinear: every rank sends to the root, which receives them all at
// once and folds them in rank order (x0 ⊕ (x1 ⊕ (... ⊕ x(n-1)))): correct
// for non-commutative operations.
func reduceLinear(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	own := a.own()
	if me != a.Root {
		return c.send(own, a.Root)
	}
	m := len(own)
	tmp := getBuf(m * n)
	defer putBufOK(tmp, &err)
	var p pending
	for r := 0; r < n; r++ {
		if r != me {
			if err := p.recv(c, tmp[r*m:(r+1)*m], r); err != nil {
				return err
			}
		}
	}
	copy(tmp[me*m:], own)
	if err := p.wait(c); err != nil {
		return err
	}
	acc := tmp[(n-1)*m : n*m]
	for r := n - 2; r >= 0; r-- {
		a.Op.Apply(tmp[r*m:(r+1)*m], acc)
	}
	copy(a.Recv, acc)
	return nil
}

// reduceBinomial: contributions climb a binomial tree rooted at the root;
// a parent folds its children's partial results in as they come.
// Commutative operations only (the tree is rotated to the root).
func reduceBinomial(c *Comm, a *Args) (err error) {
	b := newBinomial(c.Rank(), c.Size(), a.Root)
	own := a.own()
	m := len(own)
	if len(b.children) == 0 {
		return c.send(own, b.parent)
	}
	var acc []byte
	if b.parent < 0 {
		acc = a.Recv[:m]
	} else {
		acc = getBuf(m)
		defer putBufOK(acc, &err)
	}
	// own is folded in with the first child's data (fold3), which saves
	// copying it into acc first; in place it is there already.
	seeded := a.Send == nil && b.parent < 0
	tmp := getBuf(m * len(b.children))
	defer putBufOK(tmp, &err)
	var p pending
	// Children nearest first: the smallest subtrees finish first.
	for i := len(b.children) - 1; i >= 0; i-- {
		if err := p.recv(c, tmp[i*m:(i+1)*m], b.children[i]); err != nil {
			return err
		}
	}
	for k := range p.len() {
		i := len(b.children) - 1 - k
		e := p.at(k)
		if err := c.waitRecv(e.r, e.peer, m); err != nil {
			return err
		}
		if seeded {
			a.Op.Apply(tmp[i*m:(i+1)*m], acc)
		} else {
			fold3(a.Op, tmp[i*m:(i+1)*m], own, acc)
			seeded = true
		}
	}
	if b.parent >= 0 {
		return c.send(acc, b.parent)
	}
	return nil
}

// reduceOrdered: a binomial tree over the ranks in their own order,
// rooted at rank 0, so that every fold combines adjacent rank ranges in
// order (correct for non-commutative operations); rank 0 then passes the
// result to the root if it is another rank.
func reduceOrdered(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	b := newBinomial(me, n, 0)
	own := a.own()
	m := len(own)
	var acc []byte
	switch {
	case len(b.children) == 0 && me != a.Root:
		return c.send(own, b.parent)
	case me == a.Root && me == 0:
		a.seedRecv()
		acc = a.Recv[:m]
	default:
		acc = getBuf(m)
		defer putBufOK(acc, &err)
		copy(acc, own)
	}
	tmp := getBuf(m * len(b.children))
	defer putBufOK(tmp, &err)
	var p pending
	for i := len(b.children) - 1; i >= 0; i-- {
		if err := p.recv(c, tmp[i*m:(i+1)*m], b.children[i]); err != nil {
			return err
		}
	}
	for k := range p.len() {
		i := len(b.children) - 1 - k
		e := p.at(k)
		if err := c.waitRecv(e.r, e.peer, m); err != nil {
			return err
		}
		// acc covers the ranks below the child's: acc ⊕ child.
		foldInto(a.Op, acc, tmp[i*m:(i+1)*m])
	}
	if b.parent >= 0 {
		if err := c.send(acc, b.parent); err != nil {
			return err
		}
	}
	switch {
	case me == 0 && a.Root != 0:
		return c.send(acc, a.Root)
	case me == a.Root && me != 0:
		return c.recv(a.Recv[:m], 0)
	}
	return nil
}

// reducePipelineSeg is the pipeline's default segment (MEASUREMENTS.md).
const reducePipelineSeg = 64 << 10

// reducePipeline: the ranks form a chain ending at the root and the
// buffer flows along it in segments, each rank folding its own part into a
// segment before passing it on. Commutative operations only.
func reducePipeline(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	rel := mod(me-a.Root, n)
	from, to := (me+1)%n, mod(me-1, n) // toward the root
	own := a.own()
	m := len(own)
	seg := segSize(reducePipelineSeg, a.Elem)
	nseg := max(1, (m+seg-1)/seg)
	piece := func(b []byte, i int) []byte { return b[i*seg : min(m, (i+1)*seg)] }
	if rel == n-1 {
		var p pending
		for i := range nseg {
			if err := p.send(c, piece(own, i), to); err != nil {
				return err
			}
		}
		return p.wait(c)
	}
	var acc []byte
	if rel == 0 {
		acc = a.Recv[:m]
	} else {
		acc = getBuf(m)
		defer putBufOK(acc, &err)
	}
	tmp := getBuf(m)
	defer putBufOK(tmp, &err)
	var recvs, sends pending
	for i := range nseg {
		if err := recvs.recv(c, piece(tmp, i), from); err != nil {
			return err
		}
	}
	for i := range nseg {
		if err := c.waitRecv(recvs.at(i).r, from, len(piece(tmp, i))); err != nil {
			return err
		}
		// acc = upstream ⊕ own, segment by segment, without copying own
		// in first (in place, own is acc).
		if a.Send == nil && rel == 0 {
			a.Op.Apply(piece(tmp, i), piece(acc, i))
		} else {
			fold3(a.Op, piece(tmp, i), piece(own, i), piece(acc, i))
		}
		if rel > 0 {
			if err := sends.send(c, piece(acc, i), to); err != nil {
				return err
			}
		}
	}
	return sends.wait(c)
}

// reduceRabenseifner: a recursive-halving reduce-scatter (every core rank
// ends with the reduction of one block), then the blocks are gathered at
// the root. Each rank moves about 2(n-1)/n of the buffer instead of
// log2(n) buffers. Commutative operations only.
func reduceRabenseifner(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	f := newFold(n)
	own := a.own()
	m := len(own)
	work := getBuf(m)
	defer putBufOK(work, &err)
	copy(work, own)
	tmp := getBuf(m)
	defer putBufOK(tmp, &err)
	counts, displs := blocks(m, f.p, a.Elem)
	v := f.vrank(me)
	if me < 2*f.rem {
		if v < 0 {
			if err := c.send(work, me+1); err != nil {
				return err
			}
		} else {
			if err := c.recv(tmp[:m], me-1); err != nil {
				return err
			}
			a.Op.Apply(tmp[:m], work)
		}
	}
	if v >= 0 {
		if err := runSteps(c, f.halving(v), work, counts, displs, a.Op, tmp, nil); err != nil {
			return err
		}
	}
	// Gather: core member v sends block v to the root.
	if me != a.Root {
		if v >= 0 {
			return c.send(work[displs[v]:displs[v]+counts[v]], a.Root)
		}
		return nil
	}
	var p pending
	for w := 0; w < f.p; w++ {
		dst := a.Recv[displs[w] : displs[w]+counts[w]]
		if w == v {
			copy(dst, work[displs[w]:displs[w]+counts[w]])
			continue
		}
		if err := p.recv(c, dst, f.real(w)); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// reduceHier: each node reduces to its leader, then the leaders reduce to
// the root; each level uses the flat algorithm the table picks.
// Commutative operations only (nodes regroup the ranks).
func reduceHier(c *Comm, a *Args) (err error) {
	h := c.hier(a.Root)
	m := len(a.own())
	la := *a
	la.Root = 0
	la.Recv = nil
	var part []byte
	switch {
	case c.Me == a.Root:
		part = a.Recv[:m]
		la.Recv = part // in place stays in place: the root leads its node
	case h.leaders != nil:
		part = getBuf(m)
		defer putBufOK(part, &err)
		la.Recv = part
	}
	if err := reduceFlat(h.local, &la); err != nil {
		return err
	}
	if h.leaders == nil {
		return nil
	}
	ga := *a
	ga.Root = h.rootLeader
	if c.Me == a.Root {
		ga.Send, ga.Recv = nil, part
	} else {
		ga.Send, ga.Recv = part, nil
	}
	return reduceFlat(h.leaders, &ga)
}
