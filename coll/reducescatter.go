package coll

// Reduce_scatter: the input (a.Send, or a.Recv when a.Send is nil: in
// place) holds n blocks laid end to end, block r of a.Counts[r] bytes;
// the reduction of block r lands at the start of rank r's a.Recv.
// Reduce_scatter_block is the same with equal blocks (the entry point
// fills a.Counts).

// rsLayout is the input's block layout and this rank's input.
func rsLayout(c *Comm, a *Args) (in []byte, displs []int, total int) {
	displs = make([]int, c.Size())
	for r, k := range a.Counts {
		displs[r] = total
		total += k
	}
	in = a.Send
	if in == nil {
		in = a.Recv
	}
	return in[:total], displs, total
}

// reduceScatterReduce: a reduce of the whole input to rank 0, then a
// scatter of the blocks. Any operation.
func reduceScatterReduce(c *Comm, a *Args) (err error) {
	in, displs, total := rsLayout(c, a)
	me := c.Rank()
	var full []byte
	if me == 0 {
		full = getBuf(total)
		defer putBufOK(full, &err)
	}
	ra := &Args{Send: in, Recv: full, Op: a.Op, Elem: a.Elem, Root: 0}
	if a.commutative() {
		err = reduceBinomial(c, ra)
	} else {
		err = reduceOrdered(c, ra)
	}
	if err != nil {
		return err
	}
	return scattervLinear(c, &Args{Send: full, Recv: a.Recv[:a.Counts[me]], Counts: a.Counts, Displs: displs, Root: 0})
}

// reduceScatterRing: a ring reduce-scatter; n-1 steps each moving one
// block. Commutative operations only.
func reduceScatterRing(c *Comm, a *Args) (err error) {
	in, displs, total := rsLayout(c, a)
	n, me := c.Size(), c.Rank()
	work := getBuf(total)
	defer putBufOK(work, &err)
	copy(work, in)
	big := 0
	for _, k := range a.Counts {
		big = max(big, k)
	}
	tmp := getBuf(big)
	defer putBufOK(tmp, &err)
	if err := runSteps(c, ringReduceScatter(me, n, 1), work, a.Counts, displs, a.Op, tmp, nil); err != nil {
		return err
	}
	copy(a.Recv, work[displs[me]:displs[me]+a.Counts[me]])
	return nil
}

// reduceScatterHalving: recursive halving, log2(n) exchanges of halving
// ranges. Commutative operations, power-of-two sizes.
func reduceScatterHalving(c *Comm, a *Args) (err error) {
	in, displs, total := rsLayout(c, a)
	me := c.Rank()
	work := getBuf(total)
	defer putBufOK(work, &err)
	copy(work, in)
	tmp := getBuf(total)
	defer putBufOK(tmp, &err)
	f := newFold(c.Size())
	if err := runSteps(c, f.halving(me), work, a.Counts, displs, a.Op, tmp, nil); err != nil {
		return err
	}
	copy(a.Recv, work[displs[me]:displs[me]+a.Counts[me]])
	return nil
}
