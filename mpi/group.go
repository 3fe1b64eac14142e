package mpi

import "slices"

// Undefined is MPI_UNDEFINED: the rank of a process outside a group, and
// the Split color of a process that joins no new communicator.
const Undefined = -32766

// ProcNull is MPI_PROC_NULL: the neighbour CartShift reports past the edge
// of a non-periodic dimension.
const ProcNull = -2

// Comparison is the result of comparing two groups or communicators.
type Comparison int

// The results of GroupCompare and CommCompare (MPI's values).
const (
	// Ident: the same object (communicators), or the same members in the
	// same order (groups).
	Ident Comparison = 0
	// Congruent: communicators with the same members in the same order but
	// different contexts.
	Congruent Comparison = 1
	// Similar: the same members in another order.
	Similar Comparison = 2
	// Unequal: different members.
	Unequal Comparison = 3
)

func (c Comparison) String() string {
	switch c {
	case Ident:
		return "ident"
	case Congruent:
		return "congruent"
	case Similar:
		return "similar"
	}
	return "unequal"
}

// Group is an ordered set of processes (MPI_Group). Groups are values
// local to a process: making one involves no communication. Use
// Comm.Create to make a communicator of one.
type Group struct {
	world []int // members' world ranks, in group order
	me    int   // this process's world rank
}

// GroupEmpty is the group with no members (MPI_GROUP_EMPTY).
var GroupEmpty = &Group{me: -1}

// Group returns c's group (also of a revoked c: it is local).
func (c *Comm) Group() (*Group, error) {
	if err := c.checkLive("Comm.Group"); err != nil {
		return nil, err
	}
	return &Group{world: slices.Clone(c.world), me: c.world[c.rank]}, nil
}

// Size is the number of processes in g.
func (g *Group) Size() int {
	if g == nil {
		return 0
	}
	return len(g.world)
}

// Rank is this process's rank in g, or Undefined when it is not a member.
func (g *Group) Rank() int {
	if g == nil {
		return Undefined
	}
	if i := slices.Index(g.world, g.me); i >= 0 {
		return i
	}
	return Undefined
}

func (g *Group) derive(world []int) *Group {
	me := g.me
	return &Group{world: world, me: me}
}

func checkGroup(op string, gs ...*Group) error {
	for _, g := range gs {
		if g == nil {
			return errorf(ErrGroup, op, "nil group")
		}
	}
	return nil
}

// checkRanks validates distinct ranks of g.
func (g *Group) checkRanks(op string, ranks []int) error {
	seen := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		if r < 0 || r >= len(g.world) {
			return errorf(ErrRank, op, "rank %d is not in the group (size %d)", r, len(g.world))
		}
		if seen[r] {
			return errorf(ErrRank, op, "rank %d given twice", r)
		}
		seen[r] = true
	}
	return nil
}

// Incl returns the group of g's members ranks[0], ranks[1], ... in that
// order (MPI_Group_incl).
func (g *Group) Incl(ranks []int) (*Group, error) {
	if err := checkGroup("Group.Incl", g); err != nil {
		return nil, err
	}
	return g.incl("Group.Incl", ranks)
}

func (g *Group) incl(op string, ranks []int) (*Group, error) {
	if err := g.checkRanks(op, ranks); err != nil {
		return nil, err
	}
	w := make([]int, len(ranks))
	for i, r := range ranks {
		w[i] = g.world[r]
	}
	return g.derive(w), nil
}

// Excl returns g without the members of the given ranks, the rest in
// their order (MPI_Group_excl).
func (g *Group) Excl(ranks []int) (*Group, error) {
	if err := checkGroup("Group.Excl", g); err != nil {
		return nil, err
	}
	return g.excl("Group.Excl", ranks)
}

func (g *Group) excl(op string, ranks []int) (*Group, error) {
	if err := g.checkRanks(op, ranks); err != nil {
		return nil, err
	}
	var w []int
	for i, x := range g.world {
		if !slices.Contains(ranks, i) {
			w = append(w, x)
		}
	}
	return g.derive(w), nil
}

// GroupUnion returns a's members, then b's members not in a
// (MPI_Group_union).
func GroupUnion(a, b *Group) (*Group, error) {
	if err := checkGroup("GroupUnion", a, b); err != nil {
		return nil, err
	}
	w := slices.Clone(a.world)
	for _, x := range b.world {
		if !slices.Contains(a.world, x) {
			w = append(w, x)
		}
	}
	return a.derive(w), nil
}

// GroupIntersection returns a's members that are also in b, in a's order
// (MPI_Group_intersection).
func GroupIntersection(a, b *Group) (*Group, error) {
	if err := checkGroup("GroupIntersection", a, b); err != nil {
		return nil, err
	}
	var w []int
	for _, x := range a.world {
		if slices.Contains(b.world, x) {
			w = append(w, x)
		}
	}
	return a.derive(w), nil
}

// GroupDifference returns a's members that are not in b, in a's order
// (MPI_Group_difference).
func GroupDifference(a, b *Group) (*Group, error) {
	if err := checkGroup("GroupDifference", a, b); err != nil {
		return nil, err
	}
	var w []int
	for _, x := range a.world {
		if !slices.Contains(b.world, x) {
			w = append(w, x)
		}
	}
	return a.derive(w), nil
}

// GroupTranslateRanks returns the rank in b of each of the given ranks of
// a, Undefined for a process not in b and ProcNull for ProcNull
// (MPI_Group_translate_ranks).
func GroupTranslateRanks(a *Group, ranks []int, b *Group) ([]int, error) {
	if err := checkGroup("GroupTranslateRanks", a, b); err != nil {
		return nil, err
	}
	out := make([]int, len(ranks))
	for i, r := range ranks {
		if r == ProcNull {
			out[i] = ProcNull
			continue
		}
		if r < 0 || r >= len(a.world) {
			return nil, errorf(ErrRank, "GroupTranslateRanks", "rank %d is not in the first group (size %d)", r, len(a.world))
		}
		out[i] = Undefined
		if j := slices.Index(b.world, a.world[r]); j >= 0 {
			out[i] = j
		}
	}
	return out, nil
}

// GroupCompare reports Ident (same members, same order), Similar (same
// members) or Unequal (MPI_Group_compare).
func GroupCompare(a, b *Group) (Comparison, error) {
	if err := checkGroup("GroupCompare", a, b); err != nil {
		return Unequal, err
	}
	return compareMembers(a.world, b.world, Ident), nil
}

// compareMembers compares two member lists; same is the answer for the
// same list in the same order.
func compareMembers(a, b []int, same Comparison) Comparison {
	if slices.Equal(a, b) {
		return same
	}
	if len(a) != len(b) {
		return Unequal
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	if slices.Equal(x, y) {
		return Similar
	}
	return Unequal
}
