package mpi

import (
	"fmt"
	"slices"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/coll"
)

// CreateGroup returns a communicator of the members of g, which must be a
// subset of c's, in g's order (MPI_Comm_create_group). Unlike Create it
// is collective over g's members only: the other processes of c do not
// call it, and a process outside g that does gets nil at once. tag tells
// apart calls that may run at the same time over overlapping groups of
// c (from several goroutines); such calls must use different tags, and
// every member of one call the same tag.
//
// How: the members agree on a context id as every constructor does
// (ctxid.go), the bitwise and of their masks computed by group rank 0
// (linear: g is not a communicator yet) with messages on c's collective
// context under a tag of their own, which no collective of c uses (coll's
// tags are non-negative), so that they meet neither c's collectives nor
// its point-to-point traffic.
func (c *Comm) CreateGroup(g *Group, tag int) (*Comm, error) {
	d, err := c.createGroup(g, tag)
	return d, c.fail(err)
}

func (c *Comm) createGroup(g *Group, tag int) (*Comm, error) {
	const op = "Comm.CreateGroup"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if err := c.intra(op); err != nil {
		return nil, err
	}
	if err := checkGroup(op, g); err != nil {
		return nil, err
	}
	if err := checkTag(op, tag, false); err != nil {
		return nil, err
	}
	for _, w := range g.world {
		if c.fromWorld(w) < 0 {
			return nil, errorf(ErrGroup, op, "world rank %d of the group is not in %s", w, c.name)
		}
	}
	me := slices.Index(g.world, c.world[c.rank])
	if me < 0 {
		return nil, nil
	}
	members := slices.Clone(g.world)
	ctx, err := c.agreeCtxKey(op, ctxKey(c.ctx, uint32(tag)+1), func(buf []uint64) error {
		return c.groupBand(op, members, me, groupTag(tag), buf)
	})
	if err != nil {
		return nil, err
	}
	d := newComm(fmt.Sprintf("%s group %d", c.name, tag), c.rt, ctx, members, me)
	d.inherit(c)
	return d, nil
}

// groupTag is the tag on c's collective context of CreateGroup's messages
// for the caller's tag t: negative (-2-t), and for TagUB, whose negative
// would not fit the 32 bits of a tag, coll.TagSpare, which coll sets
// aside for it (it was 1, the tag of coll's shared-memory set-up: a
// CreateGroup with TagUB beside a communicator's first collective could
// take the set-up's message or give it its own).
func groupTag(t int) int {
	if t == TagUB {
		return coll.TagSpare
	}
	return -2 - t
}

// groupBand sets buf to the bitwise and of buf over members (world ranks;
// this process is members[me]): every member sends its words to
// members[0], which sends the result back. A message carries one more
// word: 1 when members[0] failed to hear from some member, so that the
// others fail too instead of waiting.
func (c *Comm) groupBand(op string, members []int, me, tag int, buf []uint64) error {
	msg := append(slices.Clone(buf), 0)
	if me != 0 {
		if err := c.groupXfer(op, true, members, 0, tag, msg); err != nil {
			return err
		}
		if err := c.groupXfer(op, false, members, 0, tag, msg); err != nil {
			return err
		}
		if msg[len(buf)] != 0 {
			return errorf(ErrOther, op, "group rank 0 failed to hear from another member (see its error)")
		}
		copy(buf, msg)
		return nil
	}
	tmp := make([]uint64, len(msg))
	var ferr error
	for p := 1; p < len(members) && ferr == nil; p++ {
		ferr = c.groupXfer(op, false, members, p, tag, tmp)
		for i := range buf {
			msg[i] &= tmp[i]
		}
	}
	if ferr != nil {
		msg[len(buf)] = 1
	}
	for p := 1; p < len(members); p++ {
		if err := c.groupXfer(op, true, members, p, tag, msg); err != nil && ferr == nil {
			ferr = err
		}
	}
	copy(buf, msg)
	return ferr
}

// groupXfer sends msg to, or receives exactly msg's length into it from,
// members[peer] on c's collective context with tag.
func (c *Comm) groupXfer(op string, send bool, members []int, peer, tag int, msg []uint64) error {
	m := btl.HostMem(elemBytes(msg))
	ctx := c.ctx + 1
	if send {
		r, err := c.rt.eng.IsendMem(ctx, members[peer], tag, m, false)
		if err != nil {
			return wrap(op, fmt.Errorf("send to group rank %d: %w", peer, err))
		}
		_, err = finishRaw(op, c, r, 1)
		return err
	}
	r, err := c.rt.eng.IrecvMem(ctx, members[peer], tag, m)
	if err != nil {
		return wrap(op, fmt.Errorf("receive from group rank %d: %w", peer, err))
	}
	st, err := finishRaw(op, c, r, 1)
	if err == nil && st.bytes != m.Len() {
		err = errorf(ErrIntern, op, "group rank %d sent %d bytes of context ids, not %d", peer, st.bytes, m.Len())
	}
	return err
}
