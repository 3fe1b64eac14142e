package coll

// Allgather: a.Send is this rank's block (nil: in place, it is already at
// its place in a.Recv); a.Recv receives block r at r*blk at every rank.
// Allgatherv: a.Counts and a.Displs (bytes, the same at every rank) place
// the blocks in a.Recv.

// allgatherSetup puts this rank's block in place and returns the layout.
func allgatherSetup(c *Comm, a *Args) (counts, displs []int) {
	n, me := c.Size(), c.Rank()
	blk := gatherBlock(c, a)
	counts, displs = make([]int, n), make([]int, n)
	for r := range n {
		counts[r], displs[r] = blk, r*blk
	}
	if a.Send != nil {
		copy(a.Recv[me*blk:], a.Send)
	}
	return counts, displs
}

// allgatherRing: n-1 steps, each passing one block to the right
// neighbour: bandwidth-optimal, n-1 latencies.
func allgatherRing(c *Comm, a *Args) error {
	counts, displs := allgatherSetup(c, a)
	return runSteps(c, ringAllgather(c.Rank(), c.Size(), 0), a.Recv, counts, displs, nil, nil, nil)
}

// allgatherRecursiveDoubling: log2(n) exchanges of doubling block ranges.
// Power-of-two sizes only.
func allgatherRecursiveDoubling(c *Comm, a *Args) error {
	counts, displs := allgatherSetup(c, a)
	f := newFold(c.Size())
	return runSteps(c, f.doubling(c.Rank()), a.Recv, counts, displs, nil, nil, nil)
}

// allgatherBruck: ceil(log2 n) rounds for any n; in round k each rank
// sends the blocks it has (in an order rotated to start at its own) to
// rank-2^k and receives as many from rank+2^k; a final local rotation puts
// them in place.
func allgatherBruck(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	blk := gatherBlock(c, a)
	tmp := getBuf(n * blk)
	defer putBufOK(tmp, &err)
	if a.Send != nil {
		copy(tmp, a.Send)
	} else {
		copy(tmp, a.Recv[me*blk:(me+1)*blk])
	}
	dist, count := bruckSteps(n)
	for k, d := range dist {
		cnt := count[k] * blk
		if err := c.sendrecv(tmp[:cnt], mod(me-d, n), tmp[d*blk:d*blk+cnt], (me+d)%n); err != nil {
			return err
		}
	}
	for i := range n {
		r := (me + i) % n
		copy(a.Recv[r*blk:(r+1)*blk], tmp[i*blk:(i+1)*blk])
	}
	return nil
}

// allgatherLinear: a linear gather to rank 0, then a binomial broadcast.
func allgatherLinear(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	blk := gatherBlock(c, a)
	ga := &Args{Send: a.Send, Recv: a.Recv, Root: 0}
	if a.Send == nil && me != 0 {
		ga.Send = a.Recv[me*blk : (me+1)*blk]
	}
	if err := gatherLinear(c, ga); err != nil {
		return err
	}
	return bcastBinomial(c, &Args{Recv: a.Recv[:n*blk], Root: 0})
}

// allgatherDirect: every rank sends its block to every other at once and
// receives theirs: one round, n-1 messages each way per rank.
func allgatherDirect(c *Comm, a *Args) error {
	counts, displs := allgatherSetup(c, a)
	return allgathervDirectLayout(c, a.Recv, counts, displs)
}

// allgathervRing: the ring over blocks of varying sizes.
func allgathervRing(c *Comm, a *Args) error {
	me := c.Rank()
	if a.Send != nil {
		copy(a.Recv[a.Displs[me]:a.Displs[me]+a.Counts[me]], a.Send)
	}
	return runSteps(c, ringAllgather(me, c.Size(), 0), a.Recv, a.Counts, a.Displs, nil, nil, nil)
}

// allgathervDirect: every rank sends its block to every other at once.
func allgathervDirect(c *Comm, a *Args) error {
	me := c.Rank()
	if a.Send != nil {
		copy(a.Recv[a.Displs[me]:a.Displs[me]+a.Counts[me]], a.Send)
	}
	return allgathervDirectLayout(c, a.Recv, a.Counts, a.Displs)
}

func allgathervDirectLayout(c *Comm, buf []byte, counts, displs []int) error {
	n, me := c.Size(), c.Rank()
	own := buf[displs[me] : displs[me]+counts[me]]
	var p pending
	for k := 1; k < n; k++ {
		src := mod(me-k, n)
		if err := p.recv(c, buf[displs[src]:displs[src]+counts[src]], src); err != nil {
			return err
		}
	}
	for k := 1; k < n; k++ {
		if err := p.send(c, own, (me+k)%n); err != nil {
			return err
		}
	}
	return p.wait(c)
}
