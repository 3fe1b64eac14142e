package coll

import (
	"fmt"

	"github.com/gorun/gorun/p2p"
)

// Comm is a communicator as the algorithms see it.
type Comm struct {
	E *p2p.Engine
	// Ctx is the communicator's collective context id.
	Ctx uint32
	// World maps a rank of the communicator to its world rank.
	World []int
	// Me is this process's rank in the communicator.
	Me int
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.Me }

// Size is the communicator's size.
func (c *Comm) Size() int { return len(c.World) }

func (c *Comm) isend(buf []byte, dst, tag int) (*p2p.Request, error) {
	return c.E.Isend(c.Ctx, c.World[dst], tag, buf, false)
}

func (c *Comm) irecv(buf []byte, src, tag int) (*p2p.Request, error) {
	return c.E.Irecv(c.Ctx, c.World[src], tag, buf)
}

func (c *Comm) send(buf []byte, dst, tag int) error {
	r, err := c.isend(buf, dst, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

func (c *Comm) recv(buf []byte, src, tag int) error {
	r, err := c.irecv(buf, src, tag)
	if err != nil {
		return err
	}
	st, err := r.Wait()
	if err == nil && st.Bytes != len(buf) {
		return fmt.Errorf("coll: from rank %d: %d bytes where %d were expected (mismatched counts?)", src, st.Bytes, len(buf))
	}
	return err
}

// sendrecv exchanges with two peers at once (no deadlock whatever the
// message sizes).
func (c *Comm) sendrecv(sbuf []byte, dst int, rbuf []byte, src, tag int) error {
	rr, err := c.irecv(rbuf, src, tag)
	if err != nil {
		return err
	}
	sr, err := c.isend(sbuf, dst, tag)
	if err != nil {
		return err
	}
	if _, err := sr.Wait(); err != nil {
		return err
	}
	st, err := rr.Wait()
	if err == nil && st.Bytes != len(rbuf) {
		return fmt.Errorf("coll: from rank %d: %d bytes where %d were expected (mismatched counts?)", src, st.Bytes, len(rbuf))
	}
	return err
}

// Op is a reduction operation on bytes.
type Op interface {
	// Apply sets inout = in ⊕ inout elementwise; in holds the lower ranks'
	// contribution.
	Apply(in, inout []byte)
	// Commutative reports whether operands may be reordered.
	Commutative() bool
}

// Tags of the collectives on a communicator's collective context.
const (
	tagBarrier = 1 + iota
	tagBcast
	tagReduce
	tagAllreduce
)
