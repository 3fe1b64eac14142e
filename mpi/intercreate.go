package mpi

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gorun/gorun/coll"
)

// Constructors over an intercommunicator (MPI-3.1 §6.4.2): Dup, Idup,
// Split and Create make intercommunicators. Each is collective over both
// groups, and the new context pair is agreed over both (agreeInterCtx),
// as Merge's is: every round of ctxid.go's agreement is a bitwise-and
// Allreduce over the union of the two groups, so the pair is free at
// every process of either group. Split and Create give nil to a process
// whose new local group or remote group would be empty (MPI_COMM_NULL).

// agreeInterCtx agrees with every process of both groups of the
// intercommunicator c on a context pair free at all of them, and takes
// it.
func (c *Comm) agreeInterCtx(op string) (uint32, error) {
	return c.agreeCtxKey(op, ctxKey(c.ctx, 0), func(buf []uint64) error {
		var cl call
		if err := reductionCall(op, coll.Allreduce, buf, buf, Band, &cl); err != nil {
			return err
		}
		return c.unionRun(op, cl.fn, cl.args)
	})
}

// initInter fills in the zero Comm c as the intercommunicator of the
// local group local (this process is local[rank]) and the remote group
// remote, on context pair ctx. Both groups order the union the same way:
// the group holding the lowest world rank comes first.
func (c *Comm) initInter(name string, s *rt, ctx uint32, local []int, rank int, remote []int) {
	in := &interComm{remote: remote, rindex: make(map[int]int, len(remote)),
		localFirst: slices.Min(local) < slices.Min(remote)}
	for i, w := range remote {
		in.rindex[w] = i
	}
	union, urank := slices.Concat(local, remote), rank
	if !in.localFirst {
		union, urank = slices.Concat(remote, local), len(remote)+rank
	}
	c.inter = in
	c.initWith(name, s, ctx, local, rank, union, urank)
}

// interDup is Dup of the intercommunicator c: the same two groups in the
// same orders, a context of their own, c's attributes copied.
func (c *Comm) interDup(op string) (*Comm, error) {
	ctx, err := c.agreeInterCtx(op)
	if err != nil {
		return nil, err
	}
	d := newInterComm(c.name+" dup", c.rt, ctx, slices.Clone(c.world), c.rank, slices.Clone(c.inter.remote))
	d.inherit(c)
	if err := c.copyAttrs(op, d); err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

// interIdup is Idup of the intercommunicator c: Idup's scheme (idup.go),
// with the agreement's rounds run on the union of the two groups.
func (c *Comm) interIdup() (*Comm, *Request, error) {
	const op = "Comm.Idup"
	v, err := c.interBegin(op)
	if err != nil {
		return nil, nil, c.fail(err)
	}
	nc := &Comm{name: c.name + " idup", rank: Undefined}
	local, rank, remote := slices.Clone(c.world), c.rank, slices.Clone(c.inter.remote)
	nb := &nbCall{c: c, op: op, v: v, run: func(v *coll.Comm) error {
		ctx, err := c.agreeCtxKey(op, idupKey(c.ctx, v.Seq()), idupRound(op, v))
		return c.idupDone(op, nc, err, func() { nc.initInter(nc.name, c.rt, ctx, local, rank, remote) })
	}}
	q, err := launchOwn(nb)
	if err != nil {
		return nil, nil, c.fail(err)
	}
	return nc, q, nil
}

// interSplit is Split of the intercommunicator c (MPI_Comm_split on an
// intercommunicator): the processes of each group that pass one color
// form the new local group, ranked by key and then by rank in c, and the
// processes of the other group that pass it the remote group; a process
// that passes Undefined, or whose color the other group does not pass,
// gets nil. A bad color (bad, from the caller) fails this process's
// group and aborts the exchange of colors, so the other group fails too
// instead of waiting.
func (c *Comm) interSplit(op string, color, key int, bad error) (*Comm, error) {
	n := len(c.cc.World)
	mine := []int64{int64(color), int64(key)}
	all := make([]int64, 2*n)
	v, err := c.interBegin(op)
	if err != nil {
		return nil, c.fail(err)
	}
	cl := call{fn: coll.Allgather, args: coll.Args{Send: elemBytes(mine), Recv: elemBytes(all)}}
	if err := finishCall(op, &v, &cl, bad); err != nil {
		return nil, c.fail(err)
	}
	ctx, err := c.agreeInterCtx(op)
	if err != nil {
		return nil, c.fail(err)
	}
	// The union's ranks of the local group and of the remote group.
	split := c.inter.splitAt(len(c.world))
	llo, rlo := 0, split
	if !c.inter.localFirst {
		llo, rlo = split, 0
	}
	// members lists the world ranks of the group at union ranks [lo,
	// lo+size) that pass color, in the new order, and the new rank of
	// this process's rank me in that group (-1 if absent).
	members := func(lo, size, me int) ([]int, int) {
		var rs []int
		for r := range size {
			if all[2*(lo+r)] == int64(color) {
				rs = append(rs, r)
			}
		}
		slices.SortStableFunc(rs, func(a, b int) int {
			return cmp.Compare(all[2*(lo+a)+1], all[2*(lo+b)+1])
		})
		world, at := make([]int, len(rs)), -1
		for i, r := range rs {
			world[i] = c.cc.World[lo+r]
			if r == me {
				at = i
			}
		}
		return world, at
	}
	local, me := members(llo, len(c.world), c.rank)
	remote, _ := members(rlo, len(c.inter.remote), -1)
	if color == Undefined || len(remote) == 0 {
		// One pair serves every color's intercommunicator (they have
		// no member in common); this process has none.
		ctxs.release(ctx)
		return nil, nil
	}
	d := newInterComm(fmt.Sprintf("%s split %d", c.name, color), c.rt, ctx, local, me, remote)
	d.inherit(c)
	return d, nil
}

// interCreate is Create of the intercommunicator c: each group passes a
// subgroup of its own (local) group, and the processes of the two
// subgroups get an intercommunicator of them, the local group in g's
// order; the others, and everyone when either subgroup is empty, get nil.
// A group g that is not a subgroup of the local group fails this
// process's group and, through the abort, the other group.
func (c *Comm) interCreate(op string, g *Group) (*Comm, error) {
	err := checkGroup(op, g)
	color, key := Undefined, 0
	if err == nil {
		for i, w := range g.world {
			if _, ok := c.index[w]; !ok {
				err = errorf(ErrGroup, op, "world rank %d of the group is not in the local group of %s", w, c.name)
				break
			}
			if w == c.world[c.rank] {
				color, key = 0, i
			}
		}
	}
	return c.interSplit(op, color, key, err)
}
