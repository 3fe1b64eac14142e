package mpi

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// reop renames the operation of an error from a nested call (one of op
// itself is kept as it is, not named twice).
func reop(op string, err error) error {
	if e, ok := err.(*Error); ok {
		if e.Op == op {
			return e
		}
		return &Error{Class: e.Class, Op: op, Err: e}
	}
	return wrap(op, err)
}

// SetName sets c's name, as reported by Name.
func (c *Comm) SetName(name string) { c.name = name }

// Dup returns a new communicator with c's members in c's order and a
// context of its own (MPI_Comm_dup). Collective over c. The duplicate of
// an intercommunicator is an intercommunicator of the same two groups
// (collective over both).
func (c *Comm) Dup() (*Comm, error) {
	d, err := c.dup()
	return d, c.fail(err)
}

func (c *Comm) dup() (*Comm, error) {
	if err := c.check("Comm.Dup"); err != nil {
		return nil, err
	}
	if c.inter != nil {
		return c.interDup("Comm.Dup")
	}
	ctx, err := c.agreeCtx("Comm.Dup")
	if err != nil {
		return nil, err
	}
	d := newComm(c.name+" dup", c.rt, ctx, slices.Clone(c.world), c.rank)
	if c.cart != nil {
		d.cart = c.cart.clone()
	}
	if c.graph != nil {
		d.graph = c.graph.clone()
	}
	d.inherit(c)
	if err := c.copyAttrs("Comm.Dup", d); err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

// Split partitions c by color: the processes that pass the same color get
// a new communicator together, ranked by key and then by their rank in c
// (MPI_Comm_split). A process that passes Undefined gets nil. Collective
// over c. On an intercommunicator the processes of each group that pass
// one color make the local group of a new intercommunicator, whose remote
// group is the other group's processes of that color; a color only one
// group passes gives nil (intercreate.go).
func (c *Comm) Split(color, key int) (*Comm, error) {
	if err := c.check("Comm.Split"); err != nil {
		return nil, c.fail(err)
	}
	var bad error
	if color < 0 && color != Undefined {
		bad = errorf(ErrArg, "Comm.Split", "color %d: colors are non-negative or Undefined", color)
	}
	if c.inter != nil {
		return c.interSplit("Comm.Split", color, key, bad)
	}
	return c.split("Comm.Split", color, key, bad)
}

// badColor is the color a process with bad arguments contributes to
// split's Allgather, so that every process fails the call with it rather
// than leaving the others in an Allgather it never joins.
const badColor = math.MinInt64

// split is Split on an intracommunicator; bad, when not nil, is this
// process's argument error.
func (c *Comm) split(op string, color, key int, bad error) (*Comm, error) {
	if err := c.intra(op); err != nil {
		return nil, c.fail(err)
	}
	n := c.Size()
	mine := []int64{int64(color), int64(key)}
	if bad != nil {
		mine[0] = badColor
	}
	all := make([]int64, 2*n)
	if err := Allgather(c, mine, all); err != nil {
		return nil, reop(op, err) // through c's handler in Allgather
	}
	if bad != nil {
		return nil, c.fail(bad)
	}
	for r := range n {
		if all[2*r] == badColor {
			return nil, c.fail(errorf(ErrArg, op, "rank %d of %s passed a bad color", r, c.name))
		}
	}
	type member struct{ key, rank int }
	var ms []member
	for r := range n {
		if int(all[2*r]) == color && color != Undefined {
			ms = append(ms, member{int(all[2*r+1]), r})
		}
	}
	// One pair for every color's communicator: they have no member in
	// common.
	ctx, err := c.agreeCtx(op)
	if err != nil {
		return nil, err // through c's handler in agreeCtx's Allreduce
	}
	if color == Undefined {
		ctxs.release(ctx)
		return nil, nil
	}
	slices.SortStableFunc(ms, func(a, b member) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key) // keys span all of int: a difference could overflow
		}
		return a.rank - b.rank
	})
	world := make([]int, len(ms))
	me := -1
	for i, m := range ms {
		world[i] = c.world[m.rank]
		if m.rank == c.rank {
			me = i
		}
	}
	d := newComm(fmt.Sprintf("%s split %d", c.name, color), c.rt, ctx, world, me)
	d.inherit(c)
	return d, nil
}

// SplitKind is the kind of SplitType.
type SplitKind int

// SplitShared groups the processes that share memory, that is, run on the
// same host (MPI_COMM_TYPE_SHARED).
const SplitShared SplitKind = 1

// SplitType partitions c by kind: with SplitShared, the processes of each
// host get a communicator together, ranked by key and then by rank in c
// (MPI_Comm_split_type). A process that passes SplitKind(Undefined) takes
// part and gets nil (MPI_UNDEFINED). Collective over c.
func (c *Comm) SplitType(kind SplitKind, key int) (*Comm, error) {
	if err := c.check("Comm.SplitType"); err != nil {
		return nil, c.fail(err)
	}
	if kind == SplitKind(Undefined) {
		return c.split("Comm.SplitType", Undefined, key, nil)
	}
	if kind != SplitShared {
		// Refused before the collective: the other processes then wait
		// in it, as with any collective a process does not join.
		return nil, c.fail(errorf(ErrArg, "Comm.SplitType", "unknown split kind %d (SplitShared or SplitKind(Undefined))", kind))
	}
	hosts := hostsOf(c.rt, c.world)
	color := c.rank
	if hosts != nil {
		color = slices.Index(hosts, hosts[c.rank])
	}
	return c.split("Comm.SplitType", color, key, nil)
}

// Create returns a communicator of the members of g, which must be a
// subset of c's, in g's order (MPI_Comm_create); processes outside g get
// nil. Collective over c: every process of c calls it with the same group.
// On an intercommunicator each group passes a subgroup of its own group,
// and the two subgroups make a new intercommunicator; when either is
// empty every process gets nil.
func (c *Comm) Create(g *Group) (*Comm, error) {
	if err := c.check("Comm.Create"); err != nil {
		return nil, c.fail(err)
	}
	if c.inter != nil {
		return c.interCreate("Comm.Create", g)
	}
	if err := checkGroup("Comm.Create", g); err != nil {
		return nil, c.fail(err)
	}
	for _, w := range g.world {
		if c.fromWorld(w) < 0 {
			return nil, c.fail(errorf(ErrGroup, "Comm.Create", "world rank %d of the group is not in %s", w, c.name))
		}
	}
	ctx, err := c.agreeCtx("Comm.Create")
	if err != nil {
		return nil, err
	}
	me := slices.Index(g.world, c.world[c.rank])
	if me < 0 {
		ctxs.release(ctx)
		return nil, nil
	}
	d := newComm(c.name+" create", c.rt, ctx, slices.Clone(g.world), me)
	d.inherit(c)
	return d, nil
}

// Free releases c (MPI_Comm_free): any later use fails with ErrComm.
// MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed. Collective over c in
// MPI's terms, though it communicates with no one.
//
// Free first deletes c's attributes, in the reverse order they were set,
// running their DeleteFuncs; if one fails, Free returns its error and
// leaves c, that attribute and the ones set before it as they are (Free
// may be called again).
func (c *Comm) Free() error {
	return c.fail(c.free())
}

func (c *Comm) free() error {
	if err := c.checkLive("Comm.Free"); err != nil {
		return err
	}
	if c == c.rt.world || c == c.rt.self {
		return errorf(ErrComm, "Comm.Free", "%s cannot be freed", c.name)
	}
	if err := c.deleteAllAttrs("Comm.Free"); err != nil {
		return err
	}
	if !c.release() {
		return errorf(ErrComm, "Comm.Free", "communicator %s was freed", c.name)
	}
	return nil
}

// release frees c's resources once; it reports whether this call did.
func (c *Comm) release() bool {
	if !c.freed.CompareAndSwap(false, true) {
		return false
	}
	c.cc.Close()
	c.rt.unregister(c)
	ctxs.release(c.ctx)
	return true
}

// CommCompare reports Ident (the same communicator), Congruent (same
// members in the same order), Similar (same members) or Unequal
// (MPI_Comm_compare). Two intercommunicators compare by both groups (the
// weaker answer of the two); an intercommunicator and an
// intracommunicator are Unequal.
func CommCompare(a, b *Comm) (Comparison, error) {
	for _, c := range []*Comm{a, b} { // nil, freed, or of a finished runtime
		if err := c.checkLive("CommCompare"); err != nil {
			return Unequal, err
		}
	}
	if a == b {
		return Ident, nil
	}
	local := compareMembers(a.world, b.world, Congruent)
	switch {
	case a.inter == nil && b.inter == nil:
		return local, nil
	case a.inter == nil || b.inter == nil:
		return Unequal, nil
	}
	return max(local, compareMembers(a.inter.remote, b.inter.remote, Congruent)), nil
}
