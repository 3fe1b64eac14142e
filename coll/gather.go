package coll

// Gather: a.Send is this rank's block (nil at the root: in place, the
// root's block is already at its place in a.Recv); a.Recv, at the root,
// receives block r at r*blk.
//
// Scatter: a.Send, at the root, holds block r at r*blk; a.Recv receives
// this rank's block (nil at the root: in place, it stays in a.Send).
//
// The v forms take a.Counts and a.Displs (bytes) at the root.

// gatherBlock is the block size of a Gather as this rank knows it.
func gatherBlock(c *Comm, a *Args) int {
	if a.Send != nil || c.Size() == 0 {
		return len(a.Send)
	}
	return len(a.Recv) / c.Size()
}

// scatterBlock is the block size of a Scatter as this rank knows it.
func scatterBlock(c *Comm, a *Args) int {
	if a.Recv != nil || c.Size() == 0 {
		return len(a.Recv)
	}
	return len(a.Send) / c.Size()
}

// gatherLinear: every rank sends its block straight to the root, which
// receives them all at once.
func gatherLinear(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	if me != a.Root {
		return c.send(a.Send, a.Root)
	}
	blk := gatherBlock(c, a)
	var p pending
	for r := 0; r < n; r++ {
		if r == me {
			if a.Send != nil {
				copy(a.Recv[r*blk:], a.Send)
			}
			continue
		}
		if err := p.recv(c, a.Recv[r*blk:(r+1)*blk], r); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// gatherBinomial: blocks climb a binomial tree, each rank passing its
// whole subtree's blocks (consecutive relative ranks) in one message:
// log2(n) steps instead of n-1 messages into the root.
func gatherBinomial(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	b := newBinomial(me, n, a.Root)
	blk := gatherBlock(c, a)
	if len(b.children) == 0 {
		return c.send(a.Send, b.parent)
	}
	// buf holds the subtree's blocks in relative order, own first.
	var buf []byte
	direct := me == a.Root && a.Root == 0
	if direct {
		buf = a.Recv[:n*blk]
		if a.Send != nil {
			copy(buf, a.Send)
		}
	} else {
		buf = getBuf(b.mySize * blk)
		defer putBufOK(buf, &err)
		if a.Send != nil {
			copy(buf, a.Send)
		} else {
			copy(buf, a.Recv[me*blk:(me+1)*blk])
		}
	}
	var p pending
	for i, ch := range b.children {
		off := (mod(ch-a.Root, n) - b.rel) * blk
		if err := p.recv(c, buf[off:off+b.subtree[i]*blk], ch); err != nil {
			return err
		}
	}
	if err := p.wait(c); err != nil {
		return err
	}
	if b.parent >= 0 {
		return c.send(buf, b.parent)
	}
	if !direct {
		for i := 0; i < n; i++ {
			r := (i + a.Root) % n
			copy(a.Recv[r*blk:(r+1)*blk], buf[i*blk:(i+1)*blk])
		}
	}
	return nil
}

// gathervLinear: every rank sends its block to the root, which receives
// them at once at their displacements.
func gathervLinear(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	if me != a.Root {
		return c.send(a.Send, a.Root)
	}
	var p pending
	for r := 0; r < n; r++ {
		dst := a.Recv[a.Displs[r] : a.Displs[r]+a.Counts[r]]
		if r == me {
			if a.Send != nil {
				copy(dst, a.Send)
			}
			continue
		}
		if err := p.recv(c, dst, r); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// scatterLinear: the root sends every rank its block at once.
func scatterLinear(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	if me != a.Root {
		return c.recv(a.Recv, a.Root)
	}
	blk := scatterBlock(c, a)
	var p pending
	for r := 0; r < n; r++ {
		src := a.Send[r*blk : (r+1)*blk]
		if r == me {
			if a.Recv != nil {
				copy(a.Recv, src)
			}
			continue
		}
		if err := p.send(c, src, r); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// scatterBinomial: the root's blocks descend a binomial tree, each rank
// receiving its whole subtree's blocks in one message and passing the
// children theirs.
func scatterBinomial(c *Comm, a *Args) (err error) {
	n, me := c.Size(), c.Rank()
	b := newBinomial(me, n, a.Root)
	blk := scatterBlock(c, a)
	var buf []byte // the subtree's blocks in relative order, own first
	switch {
	case b.parent < 0 && a.Root == 0:
		buf = a.Send[:n*blk]
	case b.parent < 0:
		buf = getBuf(n * blk)
		defer putBufOK(buf, &err)
		for i := 0; i < n; i++ {
			r := (i + a.Root) % n
			copy(buf[i*blk:(i+1)*blk], a.Send[r*blk:(r+1)*blk])
		}
	case len(b.children) == 0:
		return c.recv(a.Recv, b.parent)
	default:
		buf = getBuf(b.mySize * blk)
		defer putBufOK(buf, &err)
		if err := c.recv(buf, b.parent); err != nil {
			return err
		}
	}
	var p pending
	for i, ch := range b.children {
		off := (mod(ch-a.Root, n) - b.rel) * blk
		if err := p.send(c, buf[off:off+b.subtree[i]*blk], ch); err != nil {
			return err
		}
	}
	if a.Recv != nil {
		copy(a.Recv, buf[:blk])
	}
	return p.wait(c)
}

// scattervLinear: the root sends every rank its block at once.
func scattervLinear(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	if me != a.Root {
		return c.recv(a.Recv, a.Root)
	}
	var p pending
	for r := 0; r < n; r++ {
		src := a.Send[a.Displs[r] : a.Displs[r]+a.Counts[r]]
		if r == me {
			if a.Recv != nil {
				copy(a.Recv, src)
			}
			continue
		}
		if err := p.send(c, src, r); err != nil {
			return err
		}
	}
	return p.wait(c)
}
