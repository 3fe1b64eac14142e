package coll

// barrierDissemination: in round k every rank signals rank+2^k and waits
// for rank-2^k; ceil(log2 n) rounds of zero-byte messages, any n.
func barrierDissemination(c *Comm) error {
	n, me := c.Size(), c.Rank()
	for d := 1; d < n; d <<= 1 {
		if err := c.sendrecv(nil, (me+d)%n, nil, (me-d+n)%n, tagBarrier); err != nil {
			return err
		}
	}
	return nil
}

// bcastBinomial: the root's data flows down a binomial tree in ceil(log2 n)
// steps; each rank receives once from its parent, then sends to its
// children, largest subtree first.
func bcastBinomial(c *Comm, buf []byte, root int) error {
	n, me := c.Size(), c.Rank()
	rel := (me - root + n) % n
	mask := 1
	for mask < n {
		if rel&mask != 0 {
			if err := c.recv(buf, (me-mask+n)%n, tagBcast); err != nil {
				return err
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			if err := c.send(buf, (me+mask)%n, tagBcast); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduceBinomial: contributions climb a binomial tree to the root. Commutative
// operations only: a parent folds children in tree order, not rank order.
// buf holds this rank's contribution and, at the root, receives the result;
// tmp is scratch of the same length.
func reduceBinomial(c *Comm, buf, tmp []byte, op Op, root int) error {
	n, me := c.Size(), c.Rank()
	rel := (me - root + n) % n
	for mask := 1; mask < n; mask <<= 1 {
		if rel&mask != 0 {
			return c.send(buf, (me-mask+n)%n, tagReduce)
		}
		if rel+mask < n {
			if err := c.recv(tmp, (me+mask)%n, tagReduce); err != nil {
				return err
			}
			op.Apply(tmp, buf)
		}
	}
	return nil
}

// reduceLinear: every rank sends to the root, which folds the contributions
// in rank order (x0 ⊕ (x1 ⊕ (... ⊕ x(n-1)))), correct for non-commutative
// operations. buf is this rank's contribution and the root's result.
func reduceLinear(c *Comm, buf, tmp []byte, op Op, root int) error {
	n, me := c.Size(), c.Rank()
	if me != root {
		return c.send(buf, root, tagReduce)
	}
	// The root's own contribution sits at position root in the order.
	own := append([]byte(nil), buf...)
	if root != n-1 {
		if err := c.recv(buf, n-1, tagReduce); err != nil {
			return err
		}
	}
	for i := n - 2; i >= 0; i-- {
		src := tmp
		if i == root {
			src = own
		} else if err := c.recv(tmp, i, tagReduce); err != nil {
			return err
		}
		op.Apply(src, buf)
	}
	return nil
}
