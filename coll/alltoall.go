package coll

// Alltoall: a.Send holds the block for rank r at r*blk (nil: in place,
// the blocks are in a.Recv), a.Recv receives rank r's block at r*blk.
// Alltoallv: a.SendCounts/a.SendDispls place the outgoing blocks in
// a.Send, a.Counts/a.Displs the incoming ones in a.Recv (bytes).

// alltoallInPlace gives an in-place call a copy of its outgoing blocks;
// the caller releases it with putBufOK.
func alltoallInPlace(a *Args) (send []byte, scratch bool) {
	if a.Send != nil {
		return a.Send, false
	}
	s := getBuf(len(a.Recv))
	copy(s, a.Recv)
	return s, true
}

// alltoallLinear: every send and receive posted at once; one round.
func alltoallLinear(c *Comm, a *Args) error {
	even := blockLayout{even: true, blk: len(a.Recv) / c.Size()}
	return alltoallLinearBy(c, a, even, even)
}

// alltoallPairwise: n-1 steps; in step k rank r sends to r+k and receives
// from r-k, one exchange at a time (no burst of n messages).
func alltoallPairwise(c *Comm, a *Args) error {
	even := blockLayout{even: true, blk: len(a.Recv) / c.Size()}
	return alltoallPairwiseBy(c, a, even, even)
}

// blockLayout places the blocks of an alltoall in a buffer: counts and
// displs (the v forms), or, when even, block r at r*blk (computed: equal
// blocks need no slices, which cost two allocations a call).
type blockLayout struct {
	counts, displs []int
	even           bool
	blk            int
}

// of returns block r of buf.
func (l blockLayout) of(buf []byte, r int) []byte {
	if l.even {
		return buf[r*l.blk : (r+1)*l.blk]
	}
	return buf[l.displs[r] : l.displs[r]+l.counts[r]]
}

// alltoallBruck: ceil(log2 n) rounds; in round k every rank sends, in one
// message, the blocks whose rotated index has bit k set to rank+2^k.
// Fewer messages than pairwise at the price of log2(n)/2 times the bytes:
// for small blocks.
func alltoallBruck(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	blk := len(a.Recv) / n
	send, scratch := alltoallInPlace(a)
	if scratch {
		defer putBufOK(send, &err)
	}
	tmp := getBuf(n * blk)
	defer putBufOK(tmp, &err)
	for i := range n {
		r := (me + i) % n
		copy(tmp[i*blk:(i+1)*blk], send[r*blk:(r+1)*blk])
	}
	pack := getBuf((n/2 + 1) * blk)
	defer putBufOK(pack, &err)
	unpack := getBuf((n/2 + 1) * blk)
	defer putBufOK(unpack, &err)
	for d := 1; d < n; d <<= 1 {
		k := 0
		for i := range n {
			if i&d != 0 {
				copy(pack[k*blk:], tmp[i*blk:(i+1)*blk])
				k++
			}
		}
		if err := c.sendrecv(pack[:k*blk], (me+d)%n, unpack[:k*blk], mod(me-d, n)); err != nil {
			return err
		}
		k = 0
		for i := range n {
			if i&d != 0 {
				copy(tmp[i*blk:(i+1)*blk], unpack[k*blk:])
				k++
			}
		}
	}
	for i := range n {
		r := mod(me-i, n)
		copy(a.Recv[r*blk:(r+1)*blk], tmp[i*blk:(i+1)*blk])
	}
	return nil
}

// alltoallvLinear: every send and receive posted at once.
func alltoallvLinear(c *Comm, a *Args) error {
	return alltoallLinearBy(c, a, blockLayout{counts: a.SendCounts, displs: a.SendDispls}, blockLayout{counts: a.Counts, displs: a.Displs})
}

// alltoallvPairwise: n-1 exchange steps with r+k and r-k.
func alltoallvPairwise(c *Comm, a *Args) error {
	return alltoallPairwiseBy(c, a, blockLayout{counts: a.SendCounts, displs: a.SendDispls}, blockLayout{counts: a.Counts, displs: a.Displs})
}

// alltoallLinearBy is the linear alltoall with the blocks where sl (in
// the send buffer) and rl (in a.Recv) place them.
func alltoallLinearBy(c *Comm, a *Args, sl, rl blockLayout) (err error) {
	n, me := c.Size(), c.Rank()
	send, scratch := alltoallInPlace(a)
	if scratch {
		defer putBufOK(send, &err)
	}
	var p pending
	for k := 1; k < n; k++ {
		src := mod(me-k, n)
		if err := p.recv(c, rl.of(a.Recv, src), src); err != nil {
			return err
		}
	}
	for k := 1; k < n; k++ {
		dst := (me + k) % n
		if err := p.send(c, sl.of(send, dst), dst); err != nil {
			return err
		}
	}
	copy(rl.of(a.Recv, me), sl.of(send, me))
	return p.wait(c)
}

// alltoallPairwiseBy is the pairwise alltoall with the blocks where sl
// and rl place them.
func alltoallPairwiseBy(c *Comm, a *Args, sl, rl blockLayout) (err error) {
	n, me := c.Size(), c.Rank()
	send, scratch := alltoallInPlace(a)
	if scratch {
		defer putBufOK(send, &err)
	}
	copy(rl.of(a.Recv, me), sl.of(send, me))
	to, from := pairwise(me, n)
	for k := range to {
		d, s := to[k], from[k]
		if err := c.sendrecv(sl.of(send, d), d, rl.of(a.Recv, s), s); err != nil {
			return err
		}
	}
	return nil
}
