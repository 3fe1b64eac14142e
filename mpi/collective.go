package mpi

import (
	"github.com/gorun/gorun/coll"
)

func (c *Comm) checkRoot(op string, root int) error {
	if root < 0 || root >= len(c.world) {
		return errorf(ErrRoot, op, "root %d is not in %s (size %d)", root, c.name, len(c.world))
	}
	return nil
}

// Barrier blocks until every rank of c has called it.
func Barrier(c *Comm) error {
	if err := c.check("Barrier"); err != nil {
		return err
	}
	return wrap("Barrier", coll.Barrier(&c.cc))
}

// Bcast copies root's buf into buf at every rank of c. Every rank passes a
// buffer of the same length.
func Bcast[T Numeric](c *Comm, buf []T, root int) error {
	if err := c.check("Bcast"); err != nil {
		return err
	}
	if err := c.checkRoot("Bcast", root); err != nil {
		return err
	}
	return wrap("Bcast", coll.Bcast(&c.cc, asBytes(buf), root))
}

// Reduce combines sendbuf of every rank with op into recvbuf at root.
// recvbuf matters at root only (other ranks may pass nil). sendbuf and
// recvbuf may be the same slice (in place).
func Reduce[T Numeric](c *Comm, sendbuf, recvbuf []T, op Op, root int) error {
	if err := c.check("Reduce"); err != nil {
		return err
	}
	if err := c.checkRoot("Reduce", root); err != nil {
		return err
	}
	o, err := bind[T]("Reduce", op)
	if err != nil {
		return err
	}
	var work []T
	if c.rank == root {
		if len(recvbuf) < len(sendbuf) {
			return errorf(ErrCount, "Reduce", "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
		}
		work = recvbuf[:len(sendbuf)]
		copy(work, sendbuf)
	} else {
		work = append([]T(nil), sendbuf...)
	}
	return wrap("Reduce", coll.Reduce(&c.cc, asBytes(work), o, root))
}

// Allreduce combines sendbuf of every rank with op into recvbuf at every
// rank. sendbuf and recvbuf may be the same slice (in place).
func Allreduce[T Numeric](c *Comm, sendbuf, recvbuf []T, op Op) error {
	if err := c.check("Allreduce"); err != nil {
		return err
	}
	o, err := bind[T]("Allreduce", op)
	if err != nil {
		return err
	}
	if len(recvbuf) < len(sendbuf) {
		return errorf(ErrCount, "Allreduce", "receive buffer of %d elements for %d", len(recvbuf), len(sendbuf))
	}
	work := recvbuf[:len(sendbuf)]
	copy(work, sendbuf)
	return wrap("Allreduce", coll.Allreduce(&c.cc, asBytes(work), o))
}
