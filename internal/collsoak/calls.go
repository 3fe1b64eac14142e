package collsoak

import (
	"fmt"
	"slices"

	"github.com/gorun/gorun/mpi"
)

// elem is the element types a soak passes: int64 with every operation,
// float64 of small integers with Sum (exact in any order).
type elem interface{ int64 | float64 }

// plan is one call at this rank: its buffers, its arguments and the check
// of its result, which reads recv (and send, for a scatter in place).
// exec.go makes the call on host memory or on a GPU.
type plan[T elem] struct {
	kind       string
	send, recv []T
	// alias: the call is in place. aliasSame: recv is send; aliasSendIn:
	// send is this rank's block of recv; aliasRecvIn: recv is this rank's
	// block of send (a scatter's root).
	alias  int
	root   int
	op     mpi.Op
	counts []int // the v forms' counts, and reduce_scatter's
	displs []int
	// alltoallv's send and receive counts and displacements
	sc, sd, rc, rd []int
	check          func() error
	// keep are indices of recv that the call must not write (the gaps
	// of the v forms): they hold gap until it is over.
	keep []int
}

// gap is what the gaps of a receive buffer hold.
const gap = -7777

// untouched returns what checks, once the call is over, that it wrote
// nothing where it must not: p.keep, and p.send unless in place.
func (p *plan[T]) untouched() func() error {
	var saved []T
	if p.alias == aliasNone {
		saved = slices.Clone(p.send)
	}
	return func() error {
		for _, i := range p.keep {
			if p.recv[i] != gap {
				return fmt.Errorf("%s wrote %v into the receive buffer's gap at %d", p.kind, p.recv[i], i)
			}
		}
		return same("the send buffer after the call", p.send, saved)
	}
}

const (
	aliasNone = iota
	aliasSame
	aliasSendIn
	aliasRecvIn
)

// inputs returns rank r's n elements of call k from element lo on (for
// each run of a persistent call others).
func inputs[T elem](k *call, r, lo, n int) []T {
	b := make([]T, n)
	for i := range b {
		v := value(k.step, r, lo+i) + int64(k.run)*0x5851f42d4c957f2d
		if k.float {
			b[i] = T(v % 1000)
		} else {
			b[i] = T(v)
		}
	}
	return b
}

// foldOf is k's operation on T.
func foldOf[T elem](k *call) (mpi.Op, func(a, b T) T) {
	if k.float {
		return mpi.Sum, func(a, b T) T { return a + b }
	}
	f := ops[k.op].f
	return ops[k.op].op, func(a, b T) T { return T(f(int64(a), int64(b))) }
}

// folded is the fold over ranks lo..hi-1 of their n elements from
// element at on.
func folded[T elem](k *call, lo, hi, at, n int) []T {
	return foldedOf[T](k, hi-lo, func(r int) int { return lo + r }, at, n)
}

// foldedOf is the fold over the count inputs id(0), id(1), ... (in that
// order) of their n elements from element at on.
func foldedOf[T elem](k *call, count int, id func(r int) int, at, n int) []T {
	_, f := foldOf[T](k)
	acc := inputs[T](k, id(0), at, n)
	for r := 1; r < count; r++ {
		b := inputs[T](k, id(r), at, n)
		for i := range acc {
			acc[i] = f(acc[i], b[i])
		}
	}
	return acc
}

// blocks checks block r of got, at off(r), against want(r) for every r
// of count.
func blocks[T elem](what string, count int, got []T, off func(r int) int, want func(r int) []T) error {
	for r := range count {
		if err := same(fmt.Sprintf("%s, block %d", what, r), got[off(r):], want(r)); err != nil {
			return err
		}
	}
	return nil
}

// vcounts are the per-rank counts of the v forms: up to n elements, some
// none, different at every call, with a gap after odd ranks.
func vcounts(k *call, size, n int) (counts, displs []int, total int) {
	counts, displs = make([]int, size), make([]int, size)
	for r := range size {
		counts[r] = int(uint64(value(k.step, r, -1)) % uint64(n+1))
		if r%3 == 1 {
			counts[r] = 0
		}
		displs[r] = total
		total += counts[r] + r%2
	}
	return counts, displs, total
}

func same[T elem](what string, got, want []T) error {
	if len(got) < len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
	return nil
}

// inPlace reports whether this rank passes call k in place: k drew it
// and the call is blocking (the nonblocking allreduce takes it too; the
// rooted calls ask only at the root).
func inPlace(k *call, nonblocking bool) bool { return k.inPlace && !nonblocking }

// planOf makes call k's plan at this rank of c.
func planOf[T elem](c *mpi.Comm, k *call, nonblocking bool) (*plan[T], error) {
	size, me := c.Size(), c.Rank()
	p := &plan[T]{kind: k.kind, root: k.root % size}
	p.op, _ = foldOf[T](k)
	root := p.root
	n := k.bytes / 8
	blk := n / size // a block of the per-rank-block calls: all blocks within k.bytes
	none := func() error { return nil }
	switch k.kind {
	case "barrier", "ibarrier":
		p.check = none
	case "bcast", "ibcast":
		p.recv = make([]T, n)
		if me == root {
			copy(p.recv, inputs[T](k, root, 0, n))
		}
		p.check = func() error { return same("bcast", p.recv, inputs[T](k, root, 0, n)) }
	case "reduce", "ireduce":
		p.send = inputs[T](k, me, 0, n)
		if me == root {
			p.recv = make([]T, n)
			if inPlace(k, nonblocking) {
				p.recv, p.alias = p.send, aliasSame
			}
		}
		p.check = func() error {
			if me != root {
				return nil
			}
			return same("reduce at the root", p.recv, folded[T](k, 0, size, 0, n))
		}
	case "allreduce", "iallreduce", "scan", "exscan":
		p.send, p.recv = inputs[T](k, me, 0, n), make([]T, n)
		if k.inPlace { // the nonblocking allreduce too
			p.recv, p.alias = p.send, aliasSame
		}
		lo, hi := 0, size
		switch k.kind {
		case "scan":
			hi = me + 1
		case "exscan":
			hi = me
		}
		p.check = func() error {
			if hi == 0 {
				return nil // exscan at rank 0: not written
			}
			return same(k.kind, p.recv, folded[T](k, lo, hi, 0, n))
		}
	case "allgather", "iallgather", "gather":
		gather := k.kind == "gather"
		p.send = inputs[T](k, me, 0, blk)
		if !gather || me == root {
			p.recv = make([]T, blk*size)
			if inPlace(k, nonblocking) {
				copy(p.recv[me*blk:], p.send)
				p.send, p.alias = p.recv[me*blk:(me+1)*blk], aliasSendIn
			}
		}
		p.check = func() error {
			if gather && me != root {
				return nil
			}
			return blocks(k.kind, size, p.recv, func(r int) int { return r * blk }, func(r int) []T { return inputs[T](k, r, 0, blk) })
		}
	case "scatter":
		p.recv = make([]T, blk)
		if me == root {
			p.send = inputs[T](k, root, 0, blk*size)
			if inPlace(k, nonblocking) {
				p.recv, p.alias = p.send[me*blk:(me+1)*blk], aliasRecvIn
			}
		}
		p.check = func() error { return same("scatter", p.recv, inputs[T](k, root, me*blk, blk)) }
	case "alltoall", "ialltoall":
		p.send, p.recv = inputs[T](k, me, 0, blk*size), make([]T, blk*size)
		if inPlace(k, nonblocking) {
			copy(p.recv, p.send)
			p.send, p.alias = p.recv, aliasSame
		}
		p.check = func() error {
			return blocks(k.kind, size, p.recv, func(r int) int { return r * blk }, func(r int) []T { return inputs[T](k, r, me*blk, blk) })
		}
	case "reduce_scatter_block", "ireduce_scatter_block":
		p.send, p.recv = inputs[T](k, me, 0, blk*size), make([]T, blk)
		if inPlace(k, nonblocking) {
			p.recv, p.alias = p.send, aliasSame
		}
		p.check = func() error { return same(k.kind, p.recv, folded[T](k, 0, size, me*blk, blk)) }
	case "reduce_scatter":
		p.counts, _, _ = vcounts(k, size, blk)
		total, at := 0, 0
		for r, n := range p.counts {
			if r == me {
				at = total
			}
			total += n
		}
		p.send, p.recv = inputs[T](k, me, 0, total), make([]T, p.counts[me])
		if inPlace(k, nonblocking) {
			p.recv, p.alias = p.send, aliasSame
		}
		p.check = func() error { return same("reduce_scatter", p.recv, folded[T](k, 0, size, at, p.counts[me])) }
	case "allgatherv", "gatherv":
		gather := k.kind == "gatherv"
		var total int
		p.counts, p.displs, total = vcounts(k, size, blk)
		p.send = inputs[T](k, me, 0, p.counts[me])
		if !gather || me == root {
			p.recv = make([]T, total)
			for r := 1; r < size; r += 2 {
				i := p.displs[r] + p.counts[r]
				p.recv[i] = gap
				p.keep = append(p.keep, i)
			}
			if inPlace(k, nonblocking) {
				at := p.displs[me]
				copy(p.recv[at:], p.send)
				p.send, p.alias = p.recv[at:at+p.counts[me]], aliasSendIn
			}
		}
		p.check = func() error {
			if gather && me != root {
				return nil
			}
			return blocks(k.kind, size, p.recv, func(r int) int { return p.displs[r] }, func(r int) []T { return inputs[T](k, r, 0, p.counts[r]) })
		}
	case "scatterv":
		var total int
		p.counts, p.displs, total = vcounts(k, size, blk)
		at := p.displs[me]
		p.recv = make([]T, p.counts[me])
		if me == root {
			p.send = inputs[T](k, root, 0, total)
			if inPlace(k, nonblocking) {
				p.recv, p.alias = p.send[at:at+p.counts[me]], aliasRecvIn
			}
		}
		p.check = func() error { return same("scatterv", p.recv, inputs[T](k, root, at, p.counts[me])) }
	case "alltoallv":
		// Rank s sends rank d count(s, d) elements, element i being s's
		// input element d<<32 + i.
		count := func(s, d int) int {
			if blk == 0 {
				return 0
			}
			return int(uint64(value(k.step, s, -1-d)) % uint64(blk+1))
		}
		p.sc, p.sd, p.rc, p.rd = make([]int, size), make([]int, size), make([]int, size), make([]int, size)
		for d := range size {
			p.sc[d], p.sd[d] = count(me, d), len(p.send)
			p.send = append(p.send, inputs[T](k, me, d<<32, p.sc[d])...)
			p.rc[d], p.rd[d] = count(d, me), len(p.recv)+d%2
			if d%2 == 1 {
				p.keep = append(p.keep, len(p.recv))
				p.recv = append(p.recv, gap)
			}
			p.recv = append(p.recv, make([]T, p.rc[d])...)
		}
		p.check = func() error {
			return blocks(k.kind, size, p.recv, func(s int) int { return p.rd[s] }, func(s int) []T { return inputs[T](k, s, me<<32, p.rc[s]) })
		}
	default:
		return nil, fmt.Errorf("collsoak: no call %q", k.kind)
	}
	return p, nil
}
