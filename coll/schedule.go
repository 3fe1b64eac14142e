package coll

// Schedules as pure data: who sends which blocks to whom, step by step,
// computed from (rank, size) alone. The algorithms run them (run.go); the
// unit tests check them by simulating every rank at once without a
// network (schedule_test.go).

// step is one round of one rank's schedule: send blocks [SendLo, SendHi)
// to rank To and receive blocks [RecvLo, RecvHi) from rank From, folding
// them into the local blocks when Reduce is set (commutative operations
// only: the received data is applied as the lower operand). To or From is
// -1 when the rank only receives or only sends in this step.
type step struct {
	To, From       int
	SendLo, SendHi int
	RecvLo, RecvHi int
	Reduce         bool
}

// blocks splits total bytes into n blocks of whole elements of elem
// bytes, as even as possible (the first blocks get the extra elements),
// and returns each block's byte count and offset.
func blocks(total, n, elem int) (counts, displs []int) {
	if elem < 1 {
		elem = 1
	}
	counts, displs = make([]int, n), make([]int, n)
	elems := total / elem
	q, r := elems/n, elems%n
	off := 0
	for i := range n {
		k := q
		if i < r {
			k++
		}
		counts[i], displs[i] = k*elem, off
		off += k * elem
	}
	return counts, displs
}

// ringReduceScatter: n-1 steps around the ring; in step k rank r sends
// block (r-shift-k) mod n to r+1 and folds block (r-shift-k-1) mod n
// received from r-1. Afterwards rank r holds the full reduction of block
// (r+1-shift) mod n: shift 0 suits a following ring allgather, shift 1
// leaves rank r with block r.
func ringReduceScatter(r, n, shift int) []step {
	var s []step
	to, from := (r+1)%n, (r-1+n)%n
	for k := 0; k < n-1; k++ {
		sb, rb := mod(r-shift-k, n), mod(r-shift-k-1, n)
		s = append(s, step{To: to, From: from, SendLo: sb, SendHi: sb + 1, RecvLo: rb, RecvHi: rb + 1, Reduce: true})
	}
	return s
}

// ringAllgather: n-1 steps; rank r starts owning block (r+shift) mod n; in
// step k it sends block (r+shift-k) mod n to r+1 and receives block
// (r+shift-k-1) mod n from r-1.
func ringAllgather(r, n, shift int) []step {
	var s []step
	to, from := (r+1)%n, (r-1+n)%n
	for k := 0; k < n-1; k++ {
		sb, rb := mod(r+shift-k, n), mod(r+shift-k-1, n)
		s = append(s, step{To: to, From: from, SendLo: sb, SendHi: sb + 1, RecvLo: rb, RecvHi: rb + 1})
	}
	return s
}

func mod(a, n int) int { return ((a % n) + n) % n }

// pow2Below is the largest power of two not above n (n >= 1).
func pow2Below(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// fold maps the ranks of a non-power-of-two size n onto a power-of-two
// core of p ranks: the first 2*(n-p) ranks pair up, the even one of each
// pair handing its data to the odd one and sitting out the core phase.
// vrank is r's rank in the core, or -1 for a rank that sits out.
type fold struct {
	n, p, rem int
}

func newFold(n int) fold {
	p := pow2Below(n)
	return fold{n: n, p: p, rem: n - p}
}

// vrank is rank r's place in the core, -1 if it sits out.
func (f fold) vrank(r int) int {
	switch {
	case r < 2*f.rem && r%2 == 0:
		return -1
	case r < 2*f.rem:
		return r / 2
	default:
		return r - f.rem
	}
}

// real is the rank of core member v.
func (f fold) real(v int) int {
	if v < f.rem {
		return 2*v + 1
	}
	return v + f.rem
}

// halving is the recursive-halving reduce-scatter of the core (Rabenseifner):
// blocks are the core's p blocks, each the union of the blocks owned by
// core member v (see coreBlocks). In the step of distance d, member v
// exchanges with v^d: the lower keeps the lower half of its current range
// and sends the upper half, the upper the reverse. Afterwards member v
// holds the reduction of core block v. Steps address real ranks.
func (f fold) halving(v int) []step {
	var s []step
	lo, hi := 0, f.p
	for d := f.p / 2; d >= 1; d /= 2 {
		partner := v ^ d
		mid := (lo + hi) / 2
		st := step{To: f.real(partner), From: f.real(partner), Reduce: true}
		if v < partner {
			st.SendLo, st.SendHi, st.RecvLo, st.RecvHi = mid, hi, lo, mid
			hi = mid
		} else {
			st.SendLo, st.SendHi, st.RecvLo, st.RecvHi = lo, mid, mid, hi
			lo = mid
		}
		s = append(s, st)
	}
	return s
}

// doubling is the recursive-doubling allgather of the core, the mirror of
// halving: member v starts with core block v and, in the step of distance
// d (1, 2, 4...), swaps its current range with v^d's.
func (f fold) doubling(v int) []step {
	var s []step
	lo, hi := v, v+1
	for d := 1; d < f.p; d *= 2 {
		partner := v ^ d
		plo, phi := lo+d, hi+d // the partner's range mirrors ours
		if v&d != 0 {
			plo, phi = lo-d, hi-d
		}
		s = append(s, step{To: f.real(partner), From: f.real(partner), SendLo: lo, SendHi: hi, RecvLo: plo, RecvHi: phi})
		lo, hi = min(lo, plo), max(hi, phi)
	}
	return s
}

// binomial describes rank r's place in a binomial tree over n ranks rooted
// at root: its parent (-1 at the root) and its children, largest subtree
// first, with the size of each child's subtree (in consecutive relative
// ranks starting at the child's).
type binomial struct {
	parent   int
	children []int
	subtree  []int // ranks in each child's subtree, including the child
	rel      int   // r's rank relative to the root
	mySize   int   // ranks in r's own subtree
}

func newBinomial(r, n, root int) binomial {
	rel := mod(r-root, n)
	b := binomial{parent: -1, rel: rel}
	mask := 1
	for mask < n {
		if rel&mask != 0 {
			b.parent = (rel - mask + root) % n
			break
		}
		mask <<= 1
	}
	b.mySize = min(mask, n-rel)
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			b.children = append(b.children, (rel+mask+root)%n)
			b.subtree = append(b.subtree, min(mask, n-rel-mask))
		}
	}
	return b
}

// pairwise is the exchange partner schedule of Alltoall: in step k
// (1..n-1) rank r sends to r+k and receives from r-k.
func pairwise(r, n int) (to, from []int) {
	for k := 1; k < n; k++ {
		to = append(to, (r+k)%n)
		from = append(from, mod(r-k, n))
	}
	return to, from
}

// bruckSteps is the Bruck allgather's rounds for n ranks: in round k rank
// r sends its first min(2^k, n-2^k) gathered blocks (in rotated order) to
// r-2^k and appends as many from r+2^k.
func bruckSteps(n int) (dist, count []int) {
	for d := 1; d < n; d *= 2 {
		dist = append(dist, d)
		count = append(count, min(d, n-d))
	}
	return dist, count
}
