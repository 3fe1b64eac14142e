package coll

// Bcast algorithms: a.Recv is the buffer at every rank, a.Root the root.

// bcastLinear: the root sends the whole buffer to every other rank at
// once; one latency, but the root's link carries n-1 copies.
func bcastLinear(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	if me != a.Root {
		return c.recv(a.Recv, a.Root)
	}
	var p pending
	for r := 0; r < n; r++ {
		if r != me {
			if err := p.send(c, a.Recv, r); err != nil {
				return err
			}
		}
	}
	return p.wait(c)
}

// bcastBinomial: the data flows down a binomial tree in ceil(log2 n)
// steps; each rank receives once from its parent, then sends to its
// children, largest subtree first, all at once.
func bcastBinomial(c *Comm, a *Args) error {
	b := newBinomial(c.Rank(), c.Size(), a.Root)
	if b.parent >= 0 {
		if err := c.recv(a.Recv, b.parent); err != nil {
			return err
		}
	}
	var p pending
	for _, ch := range b.children {
		if err := p.send(c, a.Recv, ch); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// bcastPipelineSeg is the pipeline's default segment: 128 KiB (see
// MEASUREMENTS.md, bcast).
const bcastPipelineSeg = 128 << 10

// bcastPipeline: the ranks form a chain from the root and the buffer
// flows down it in segments, each rank forwarding a segment as soon as it
// has it: about one buffer time plus (n-2) segment times.
func bcastPipeline(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	rel := mod(me-a.Root, n)
	prev, next := mod(me-1, n), (me+1)%n
	seg := segSize(bcastPipelineSeg, 1)
	buf := a.Recv
	nseg := (len(buf) + seg - 1) / seg
	if nseg == 0 {
		nseg = 1
	}
	piece := func(i int) []byte { return buf[i*seg : min(len(buf), (i+1)*seg)] }
	var recvs pending
	if rel > 0 {
		for i := range nseg {
			if err := recvs.recv(c, piece(i), prev); err != nil {
				return err
			}
		}
	}
	var sends pending
	for i := range nseg {
		if rel > 0 {
			if err := c.waitRecv(recvs.at(i).r, prev, len(piece(i))); err != nil {
				return err
			}
		}
		if rel < n-1 {
			if err := sends.send(c, piece(i), next); err != nil {
				return err
			}
		}
	}
	return sends.wait(c)
}

// bcastScatterAllgather (van de Geijn): the root scatters n blocks down a
// binomial tree, then a ring allgather assembles them everywhere; each
// link carries about 2(n-1)/n of the buffer instead of log2(n) buffers.
func bcastScatterAllgather(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	counts, displs := blocks(len(a.Recv), n, 1)
	rel := mod(me-a.Root, n)
	// Blocks are indexed by relative rank: rank rel ends the scatter
	// holding block rel, and its subtree's blocks follow it.
	b := newBinomial(me, n, a.Root)
	sub := func(lo, k int) []byte {
		hi := lo + k
		return a.Recv[displs[lo] : displs[hi-1]+counts[hi-1]]
	}
	if b.parent >= 0 {
		if err := c.recv(sub(rel, b.mySize), b.parent); err != nil {
			return err
		}
	}
	var p pending
	for i, ch := range b.children {
		if err := p.send(c, sub(mod(ch-a.Root, n), b.subtree[i]), ch); err != nil {
			return err
		}
	}
	if err := p.wait(c); err != nil {
		return err
	}
	steps := ringAllgather(rel, n, 0)
	for i := range steps {
		steps[i].To, steps[i].From = (me+1)%n, mod(me-1, n)
	}
	return runSteps(c, steps, a.Recv, counts, displs, nil, nil, nil)
}

// bcastHier: the root's data goes to every node's leader, then each
// leader broadcasts on its node; each level uses the flat algorithm the
// table picks for its size.
func bcastHier(c *Comm, a *Args) error {
	h := c.hier(a.Root)
	if h.leaders != nil {
		la := *a
		la.Root = h.rootLeader
		if err := bcastFlat(h.leaders, &la); err != nil {
			return err
		}
	}
	la := *a
	la.Root = 0
	return bcastFlat(h.local, &la)
}
