package mpi

// Layouts: MPI's derived datatypes in Go terms.
//
// A Layout says which elements of a slice a call sends or receives, and in
// which order: MPI's type map, counted in elements of the slice's type
// rather than in bytes. It is applied to a slice from its index 0, so
// every element it names must lie inside the slice (a negative lower
// bound, or an upper bound past len, fails the call with ErrArg). Layouts
// are immutable values: build them once, use them from any goroutine.
//
// Internally a layout is a small tree (node): a node is a list of blocks,
// each a run of copies of its child, placed by a stride (a vector) or by a
// displacement per block (the indexed forms); the leaves are single
// elements. A 2-D column costs one node whatever its length, a 3-D
// subarray three. Children whose elements are consecutive and in order
// are folded into their parent (Vector(2, 1, 4).Of(Contiguous(3)) is
// Vector(2, 3, 12)), so that the walk in layout_pack.go copies whole runs.

import "math"

// Order is the storage order of a multidimensional array (Subarray).
type Order int

const (
	// OrderC is row-major order, the last index varying fastest
	// (MPI_ORDER_C; Go's [][]T flattened row by row).
	OrderC Order = iota
	// OrderFortran is column-major order, the first index varying
	// fastest (MPI_ORDER_FORTRAN).
	OrderFortran
)

// Layout selects elements of a slice, in order: MPI's derived datatype.
// Build one with Contiguous, Vector, Indexed, IndexedBlock or Subarray,
// compose with Of and Resized, and pass it with a slice to SendLayout,
// RecvLayout and the other ...Layout calls, or to Pack and Unpack.
//
// Every number in a layout counts elements of the slice it is applied to
// (MPI counts strides and displacements in extents of the old type, and
// Of gives that: inside l.Of(inner), l's numbers count inner's extents).
// Size is how many elements the layout selects, Extent how far apart two
// copies of it sit when repeated (Contiguous(n).Of(l) is MPI's count n of
// type l).
//
// The zero Layout selects nothing. A layout built from bad arguments (a
// negative count, mismatched lengths) carries its error: Err reports it,
// and every call given that layout fails with it (ErrArg).
type Layout struct {
	t   *node
	err error
}

// node is one level of a layout: count blocks, block i holding a run of
// copies of child, copy j at displacement(i) + j*cext elements.
type node struct {
	count  int
	blen   int   // copies per block when lens is nil
	stride int   // elements between blocks when displs is nil
	lens   []int // copies per block (Indexed); nil for equal blocks
	displs []int // element offset of each block; nil for a vector
	child  *node // element for single elements

	// Derived by derive.
	size     int  // elements selected
	lb, ub   int  // the extent's bounds: Extent is ub - lb
	tlb, tub int  // true bounds: data lies in [tlb, tub)
	resized  bool // lb and ub were set by Resized and are not derived
	contig   bool // the type map is [tlb, tub) in order
	cext     int  // the child's extent
	csize    int  // the child's size
	ctlb     int  // the child's true lower bound
	crun     bool // a block of copies of the child is one run
}

// element is the leaf: one element at offset 0.
var element = &node{count: 1, blen: 1, size: 1, ub: 1, tub: 1, contig: true, cext: 1, csize: 1, crun: true}

// empty is what the zero Layout holds.
var empty = &node{child: element, contig: true, cext: 1, csize: 1, crun: true}

func (l Layout) node() *node {
	if l.t == nil {
		return empty
	}
	return l.t
}

// Err is the error of the constructor or composition that built l (class
// ErrArg), or nil for a valid layout.
func (l Layout) Err() error { return l.err }

// Size is the number of elements l selects (MPI_Type_size, in elements).
func (l Layout) Size() int { return l.node().size }

// Extent is the distance in elements between the starts of two
// consecutive copies of l (MPI_Type_get_extent): the span from the lower
// bound to the upper bound, which Resized may set.
func (l Layout) Extent() int { t := l.node(); return t.ub - t.lb }

// LowerBound is l's lower bound in elements (MPI_Type_get_extent's lb):
// 0 for layouts whose displacements are not negative, unless Resized set
// it.
func (l Layout) LowerBound() int { return l.node().lb }

// Span is the range [lo, hi) of indexes l touches: a slice it is applied
// to must have at least hi elements, and lo must not be negative
// (MPI_Type_get_true_extent). An empty layout spans [0, 0).
func (l Layout) Span() (lo, hi int) { t := l.node(); return t.tlb, t.tub }

// build derives t and wraps it, or the error that makes it invalid.
func build(op string, t *node) Layout {
	if err := t.derive(op); err != nil {
		return Layout{err: err}
	}
	return Layout{t: t}
}

func invalid(op, format string, args ...any) Layout {
	return Layout{err: errorf(ErrArg, op, format, args...)}
}

// Contiguous selects n consecutive elements (MPI_Type_contiguous).
// Contiguous(n).Of(l) is n copies of l, Extent apart: MPI's count.
func Contiguous(n int) Layout {
	if n < 0 {
		return invalid("Contiguous", "negative count %d", n)
	}
	return build("Contiguous", &node{count: 1, blen: n, child: element})
}

// Vector selects count blocks of blocklen consecutive elements, the
// starts of consecutive blocks stride elements apart (MPI_Type_vector).
// A column of a rows×cols row-major matrix is Vector(rows, 1, cols). A
// negative stride walks backwards; the layout must still stay inside the
// slice when used.
func Vector(count, blocklen, stride int) Layout {
	if count < 0 || blocklen < 0 {
		return invalid("Vector", "negative count %d or block length %d", count, blocklen)
	}
	return build("Vector", &node{count: count, blen: blocklen, stride: stride, child: element})
}

// Indexed selects blocklens[i] consecutive elements at displs[i], for
// each i in order (MPI_Type_indexed). The two slices must have one length;
// they are copied.
func Indexed(blocklens, displs []int) Layout {
	if len(blocklens) != len(displs) {
		return invalid("Indexed", "%d block lengths for %d displacements", len(blocklens), len(displs))
	}
	for i, n := range blocklens {
		if n < 0 {
			return invalid("Indexed", "negative block length %d at %d", n, i)
		}
	}
	return build("Indexed", &node{count: len(displs), lens: cloneInts(blocklens), displs: cloneInts(displs), child: element})
}

// IndexedBlock selects blocklen consecutive elements at each of displs,
// in order (MPI_Type_create_indexed_block). displs is copied.
func IndexedBlock(blocklen int, displs []int) Layout {
	if blocklen < 0 {
		return invalid("IndexedBlock", "negative block length %d", blocklen)
	}
	return build("IndexedBlock", &node{count: len(displs), blen: blocklen, displs: cloneInts(displs), child: element})
}

// Subarray selects the subsizes block starting at starts of a
// multidimensional array of sizes stored in order (MPI_Type_create_subarray):
// a halo, a face of a 3-D grid, a tile of a matrix. Its extent is the
// whole array, so that Contiguous(n).Of(sub) walks n arrays. The three
// slices have one length of at least 1; every size is positive and every
// block lies inside its array.
func Subarray(sizes, subsizes, starts []int, order Order) Layout {
	const op = "Subarray"
	k := len(sizes)
	if k == 0 || len(subsizes) != k || len(starts) != k {
		return invalid(op, "%d sizes, %d subsizes and %d starts: want one length of at least 1", k, len(subsizes), len(starts))
	}
	if order != OrderC && order != OrderFortran {
		return invalid(op, "order %d is neither OrderC nor OrderFortran", int(order))
	}
	for d := range k {
		if sizes[d] < 1 || subsizes[d] < 0 || starts[d] < 0 || starts[d] > sizes[d]-subsizes[d] {
			return invalid(op, "dimension %d: block of %d at %d does not fit in %d", d, subsizes[d], starts[d], sizes[d])
		}
	}
	// dim(i) is the i-th dimension from the slowest varying one.
	dim := func(i int) int {
		if order == OrderFortran {
			return k - 1 - i
		}
		return i
	}
	// From the fastest dimension out: a run, then vectors of it.
	ok := true
	d := dim(k - 1)
	t := &node{count: 1, blen: subsizes[d], child: element}
	if err := t.derive(op); err != nil {
		return Layout{err: err}
	}
	off, stride := starts[d], sizes[d]
	for i := k - 2; i >= 0; i-- {
		d = dim(i)
		t = &node{count: subsizes[d], blen: 1, stride: stride, child: t}
		if err := t.derive(op); err != nil {
			return Layout{err: err}
		}
		off = addc(off, mulc(starts[d], stride, &ok), &ok)
		stride = mulc(stride, sizes[d], &ok)
	}
	if !ok {
		return invalid(op, "array of %v elements overflows int", sizes)
	}
	return build(op, &node{count: 1, blen: 1, displs: []int{off}, child: t, resized: true, ub: stride})
}

// Of makes each element of l a copy of inner: l's block lengths count
// copies of inner, and its strides, displacements and bounds count
// inner's extents, as for MPI's constructors called with inner as the old
// type. Vector(rows, 1, cols).Of(Contiguous(2)) is a column of pairs.
func (l Layout) Of(inner Layout) Layout {
	switch {
	case l.err != nil:
		return l
	case inner.err != nil:
		return inner
	}
	t, err := l.node().of(inner.node(), inner.Extent())
	if err != nil {
		return Layout{err: err}
	}
	return Layout{t: t}
}

func (t *node) of(in *node, e int) (*node, error) {
	if t == element {
		return in, nil
	}
	ok := true
	u := *t
	u.stride = mulc(t.stride, e, &ok)
	if t.displs != nil {
		u.displs = make([]int, len(t.displs))
		for i, d := range t.displs {
			u.displs[i] = mulc(d, e, &ok)
		}
	}
	if t.resized {
		u.lb, u.ub = mulc(t.lb, e, &ok), mulc(t.ub, e, &ok)
	}
	if !ok {
		return nil, errorf(ErrArg, "Of", "layout scaled by an extent of %d overflows int", e)
	}
	c, err := t.child.of(in, e)
	if err != nil {
		return nil, err
	}
	u.child = c
	return &u, u.derive("Of")
}

// Resized is l with lower bound lb and extent extent
// (MPI_Type_create_resized): it moves where repeated copies of l start,
// not what l selects. A column of a rows×cols matrix resized to extent 1
// repeats as consecutive columns: Contiguous(3).Of(col.Resized(0, 1)).
func (l Layout) Resized(lb, extent int) Layout {
	if l.err != nil {
		return l
	}
	if extent < 0 || lb > math.MaxInt-extent {
		return invalid("Resized", "extent %d from lower bound %d: want an extent of at least 0 that fits in int", extent, lb)
	}
	u := *l.node()
	u.resized, u.lb, u.ub = true, lb, lb+extent
	return Layout{t: &u}
}

// block is block i: its element offset and its number of copies.
func (t *node) block(i int) (d, n int) {
	d, n = i*t.stride, t.blen
	if t.displs != nil {
		d = t.displs[i]
	}
	if t.lens != nil {
		n = t.lens[i]
	}
	return d, n
}

// dense reports whether t selects 0..size-1 in order with extent size:
// then a run of n copies is n*size consecutive elements.
func (t *node) dense() bool {
	return t.contig && t.tlb == 0 && t.lb == 0 && t.tub == t.size && t.ub == t.size
}

// derive computes t's size, bounds and contiguity from its blocks and
// child, first folding a dense child into element runs. It fails when a
// number overflows int.
func (t *node) derive(op string) error {
	ok := true
	if c := t.child; c != element && c.dense() {
		t.blen = mulc(t.blen, c.size, &ok)
		if t.lens != nil {
			lens := make([]int, len(t.lens))
			for i, n := range t.lens {
				lens[i] = mulc(n, c.size, &ok)
			}
			t.lens = lens
		}
		t.child = element
	}
	c := t.child
	t.cext, t.csize, t.ctlb = c.ub-c.lb, c.size, c.tlb
	t.crun = c.contig && c.size == t.cext
	var (
		size, lb, ub, tlb, tub int
		seen, contig           = false, true
		next                   int
	)
	visit := func(d, n int) {
		if n == 0 || c.size == 0 {
			return
		}
		size = addc(size, mulc(n, c.size, &ok), &ok)
		last := addc(d, mulc(n-1, t.cext, &ok), &ok)
		lo, hi := addc(d, c.lb, &ok), addc(last, c.ub, &ok)
		tlo, thi := addc(d, c.tlb, &ok), addc(last, c.tub, &ok)
		run := t.crun || n == 1 && c.contig
		if !seen {
			lb, ub, tlb, tub = lo, hi, tlo, thi
			contig = run
		} else {
			lb, ub, tlb, tub = min(lb, lo), max(ub, hi), min(tlb, tlo), max(tub, thi)
			contig = contig && run && tlo == next
		}
		next = addc(tlo, mulc(n, c.size, &ok), &ok)
		seen = true
	}
	if t.displs == nil && t.lens == nil && t.count > 0 {
		// A vector: its bounds are those of its first and last blocks,
		// and it is one run when each block ends where the next starts.
		visit(0, t.blen)
		if first := contig; t.count > 1 {
			visit(mulc(t.count-1, t.stride, &ok), t.blen)
			size = mulc(t.count, mulc(t.blen, c.size, &ok), &ok)
			contig = first && t.stride == mulc(t.blen, c.size, &ok)
		}
	} else {
		for i := range t.count {
			visit(t.block(i))
		}
	}
	if !ok {
		return errorf(ErrArg, op, "layout of %d blocks overflows int", t.count)
	}
	t.size, t.tlb, t.tub, t.contig = size, tlb, tub, contig || size == 0
	if !t.resized {
		t.lb, t.ub = lb, ub
	}
	return nil
}

func cloneInts(s []int) []int { return append([]int(nil), s...) }

// mulc and addc are a*b and a+b, clearing *ok when the result overflows.
func mulc(a, b int, ok *bool) int {
	if a == 0 || b == 0 {
		return 0
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt) || (b == -1 && a == math.MinInt) {
		*ok = false
	}
	return c
}

func addc(a, b int, ok *bool) int {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		*ok = false
	}
	return c
}
