package coll

// This first slice chooses by correctness alone: binomial trees for
// commutative reductions, a linear reduce otherwise. Measured selection
// tables come with the collectives issue.

// Barrier blocks until every rank of c has entered it.
func Barrier(c *Comm) error {
	if c.Size() == 1 {
		return nil
	}
	return barrierDissemination(c)
}

// Bcast copies root's buf into every rank's buf.
func Bcast(c *Comm, buf []byte, root int) error {
	if c.Size() == 1 {
		return nil
	}
	return bcastBinomial(c, buf, root)
}

// Reduce combines every rank's buf with op into root's buf. Other ranks'
// buf is left as scratch (its content is unspecified afterwards).
func Reduce(c *Comm, buf []byte, op Op, root int) error {
	if c.Size() == 1 {
		return nil
	}
	tmp := make([]byte, len(buf))
	if op.Commutative() {
		return reduceBinomial(c, buf, tmp, op, root)
	}
	return reduceLinear(c, buf, tmp, op, root)
}

// Allreduce combines every rank's buf with op into every rank's buf.
func Allreduce(c *Comm, buf []byte, op Op) error {
	if c.Size() == 1 {
		return nil
	}
	if err := Reduce(c, buf, op, 0); err != nil {
		return err
	}
	return Bcast(c, buf, 0)
}
