package mpi

// Range is a triplet of ranks of a group, MPI_Group_range_incl's: First,
// First+Stride, ... up to and including Last when the stride reaches it
// (Stride may be negative, with Last <= First; it may not be 0).
type Range struct {
	First, Last, Stride int
}

// expand lists the ranks of the ranges in order, or fails with ErrArg (a
// zero stride, a range going the wrong way) or ErrRank (a rank outside g).
func (g *Group) expand(op string, rs []Range) ([]int, error) {
	var ranks []int
	for _, r := range rs {
		if r.Stride == 0 {
			return nil, errorf(ErrArg, op, "range %+v has stride 0", r)
		}
		if (r.Stride > 0 && r.Last < r.First) || (r.Stride < 0 && r.Last > r.First) {
			return nil, errorf(ErrArg, op, "range %+v goes away from its last rank", r)
		}
		for _, x := range []int{r.First, r.Last} {
			if x < 0 || x >= len(g.world) {
				return nil, errorf(ErrRank, op, "range %+v: rank %d is not in the group (size %d)", r, x, len(g.world))
			}
		}
		for x := r.First; (r.Stride > 0 && x <= r.Last) || (r.Stride < 0 && x >= r.Last); x += r.Stride {
			ranks = append(ranks, x)
		}
	}
	return ranks, nil
}

// RangeIncl returns the group of g's members at the ranks the ranges
// name, in that order (MPI_Group_range_incl). A rank named twice fails
// with ErrRank.
func (g *Group) RangeIncl(rs []Range) (*Group, error) {
	if err := checkGroup("Group.RangeIncl", g); err != nil {
		return nil, err
	}
	ranks, err := g.expand("Group.RangeIncl", rs)
	if err != nil {
		return nil, err
	}
	return g.incl("Group.RangeIncl", ranks)
}

// RangeExcl returns g without the members at the ranks the ranges name,
// the rest in their order (MPI_Group_range_excl). A rank named twice fails
// with ErrRank.
func (g *Group) RangeExcl(rs []Range) (*Group, error) {
	if err := checkGroup("Group.RangeExcl", g); err != nil {
		return nil, err
	}
	ranks, err := g.expand("Group.RangeExcl", rs)
	if err != nil {
		return nil, err
	}
	return g.excl("Group.RangeExcl", ranks)
}
