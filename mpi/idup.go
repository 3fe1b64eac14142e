package mpi

import (
	"slices"

	"github.com/gorun/gorun/coll"
)

// Idup starts duplicating c (MPI_Comm_idup): it returns at once the new
// communicator and a request; the communicator may be used once the
// request has completed (Wait, Test, ...), and using it earlier fails
// with ErrComm. Like a nonblocking collective, Idup is ordered with c's
// other collectives at the call, and other collectives on c may be
// started while it runs. When the request fails, so does every use of the
// communicator. The Idup of an intercommunicator is an intercommunicator
// of the same two groups (intercreate.go).
//
// How: the call takes its place among c's collectives at once (its
// sequence number and tag, as every nonblocking collective does); the
// context id agreement (ctxid.go), which may need several rounds, then
// runs in a goroutine, each round a bitwise-and Allreduce inside that one
// call (rounds follow each other in every process's order, and each
// peer's messages arrive in order, so rounds cannot mix).
//
// The CopyFuncs of c's attributes run in that goroutine once the context
// is agreed; one that fails fails the request (and frees the duplicate).
func (c *Comm) Idup() (*Comm, *Request, error) {
	const op = "Comm.Idup"
	if c.IsInter() {
		return c.interIdup()
	}
	v, err := c.begin(op)
	if err != nil {
		return nil, nil, err // through c's handler in begin
	}
	nc := &Comm{name: c.name + " idup", rank: Undefined}
	nb := &nbCall{c: c, op: op, v: v, run: func(v *coll.Comm) error {
		ctx, err := c.agreeCtxKey(op, idupKey(c.ctx, v.Seq()), idupRound(op, v))
		return c.idupDone(op, nc, err, func() {
			nc.init(nc.name, c.rt, ctx, slices.Clone(c.world), c.rank)
			if c.cart != nil {
				nc.cart = c.cart.clone()
			}
			if c.graph != nil {
				nc.graph = c.graph.clone()
			}
		})
	}}
	q, err := launchOwn(nb)
	if err != nil {
		return nil, nil, c.fail(err)
	}
	return nc, q, nil
}

// idupRound is one round of an Idup's context agreement: a bitwise-and
// Allreduce inside the Idup's own call v, by point-to-point algorithms
// only (no shared state with c's other calls).
func idupRound(op string, v *coll.Comm) func(buf []uint64) error {
	return func(buf []uint64) error {
		var cl call
		if err := reductionCall(op, coll.Allreduce, buf, buf, Band, &cl); err != nil {
			return err
		}
		cl.args.Nonblocking = true
		round := *v
		return wrapColl(op, cl.fn(&round, &cl.args))
	}
}

// idupDone ends an Idup's goroutine once the agreement is over (err):
// set sets the duplicate up on the agreed context (as a communicator or
// an intercommunicator), which then inherits c's settings and copies of
// its attributes; a failure leaves it freed.
func (c *Comm) idupDone(op string, nc *Comm, err error, set func()) error {
	if err != nil {
		nc.freed.Store(true)
		return err
	}
	set()
	nc.inherit(c)
	if err := c.copyAttrs(op, nc); err != nil {
		nc.release()
		return err
	}
	return nil
}
