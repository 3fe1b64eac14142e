package mpi

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// tmap is a type map computed the naive way, straight from MPI's
// definitions: every element's offset in order, and the bounds.
type tmap struct {
	offs   []int
	lb, ub int
}

var elemMap = tmap{offs: []int{0}, lb: 0, ub: 1}

// place lays copies of old at the given offsets (in extents of old), one
// block per entry of starts with lens[i] consecutive copies.
func place(old tmap, starts, lens []int) tmap {
	e := old.ub - old.lb
	var t tmap
	seen := false
	for i, d := range starts {
		for j := range lens[i] {
			at := (d + j) * e
			if len(old.offs) == 0 {
				continue
			}
			for _, o := range old.offs {
				t.offs = append(t.offs, at+o)
			}
			lo, hi := at+old.lb, at+old.ub
			if !seen {
				t.lb, t.ub, seen = lo, hi, true
			}
			t.lb, t.ub = min(t.lb, lo), max(t.ub, hi)
		}
	}
	return t
}

// recipe builds a layout two ways: with the package's constructors, and
// naively over an old type (MPI's constructors take one).
type recipe struct {
	name  string
	build func() Layout
	naive func(old tmap) tmap
}

func rVector(count, bl, stride int) recipe {
	return recipe{fmt.Sprintf("Vector(%d,%d,%d)", count, bl, stride),
		func() Layout { return Vector(count, bl, stride) },
		func(old tmap) tmap {
			starts, lens := make([]int, count), make([]int, count)
			for i := range count {
				starts[i], lens[i] = i*stride, bl
			}
			return place(old, starts, lens)
		}}
}

func rIndexed(lens, displs []int) recipe {
	return recipe{fmt.Sprintf("Indexed(%v,%v)", lens, displs),
		func() Layout { return Indexed(lens, displs) },
		func(old tmap) tmap { return place(old, displs, lens) }}
}

func rIndexedBlock(bl int, displs []int) recipe {
	return recipe{fmt.Sprintf("IndexedBlock(%d,%v)", bl, displs),
		func() Layout { return IndexedBlock(bl, displs) },
		func(old tmap) tmap {
			lens := make([]int, len(displs))
			for i := range lens {
				lens[i] = bl
			}
			return place(old, displs, lens)
		}}
}

func rContiguous(n int) recipe {
	return recipe{fmt.Sprintf("Contiguous(%d)", n),
		func() Layout { return Contiguous(n) },
		func(old tmap) tmap { return place(old, []int{0}, []int{n}) }}
}

// rSubarray enumerates the block's indexes in storage order.
func rSubarray(sizes, subsizes, starts []int, order Order) recipe {
	return recipe{fmt.Sprintf("Subarray(%v,%v,%v,%d)", sizes, subsizes, starts, order),
		func() Layout { return Subarray(sizes, subsizes, starts, order) },
		func(old tmap) tmap {
			k := len(sizes)
			dims := make([]int, k) // slowest first
			for i := range dims {
				dims[i] = i
				if order == OrderFortran {
					dims[i] = k - 1 - i
				}
			}
			var flat []int
			idx := make([]int, k)
			var walk func(i int)
			walk = func(i int) {
				if i == k {
					off, mul := 0, 1
					for j := k - 1; j >= 0; j-- {
						d := dims[j]
						off += (starts[d] + idx[d]) * mul
						mul *= sizes[d]
					}
					flat = append(flat, off)
					return
				}
				d := dims[i]
				for x := range subsizes[d] {
					idx[d] = x
					walk(i + 1)
				}
			}
			walk(0)
			t := place(old, flat, slices.Repeat([]int{1}, len(flat)))
			n := 1
			for _, s := range sizes {
				n *= s
			}
			e := old.ub - old.lb
			t.lb, t.ub = 0, n*e
			return t
		}}
}

func rOf(outer, inner recipe) recipe {
	return recipe{outer.name + ".Of(" + inner.name + ")",
		func() Layout { return outer.build().Of(inner.build()) },
		func(old tmap) tmap { return outer.naive(inner.naive(old)) }}
}

func rResized(r recipe, lb, ext int) recipe {
	return recipe{fmt.Sprintf("%s.Resized(%d,%d)", r.name, lb, ext),
		func() Layout { return r.build().Resized(lb, ext) },
		func(old tmap) tmap {
			t := r.naive(old)
			e := old.ub - old.lb
			t.lb, t.ub = lb*e, (lb+ext)*e
			return t
		}}
}

// randRecipe draws a recipe of at most depth levels of Of.
func randRecipe(rng *rand.Rand, depth int) recipe {
	n := func(lo, hi int) int { return lo + rng.IntN(hi-lo+1) }
	var r recipe
	switch rng.IntN(5) {
	case 0:
		r = rContiguous(n(0, 4))
	case 1:
		r = rVector(n(0, 4), n(0, 3), n(-2, 6))
	case 2:
		k := n(0, 4)
		lens, displs := make([]int, k), make([]int, k)
		for i := range k {
			lens[i], displs[i] = n(0, 3), n(-1, 9)
		}
		r = rIndexed(lens, displs)
	case 3:
		k := n(0, 4)
		displs := make([]int, k)
		for i := range k {
			displs[i] = n(0, 9)
		}
		r = rIndexedBlock(n(0, 3), displs)
	case 4:
		k := n(1, 3)
		sizes, sub, st := make([]int, k), make([]int, k), make([]int, k)
		for d := range k {
			sizes[d] = n(1, 4)
			sub[d] = n(0, sizes[d])
			st[d] = n(0, sizes[d]-sub[d])
		}
		r = rSubarray(sizes, sub, st, Order(rng.IntN(2)))
	}
	if rng.IntN(4) == 0 {
		r = rResized(r, n(-1, 2), n(0, 6))
	}
	if depth > 0 && rng.IntN(2) == 0 {
		r = rOf(r, randRecipe(rng, depth-1))
	}
	return r
}

// checkRecipe compares the layout with its naive type map: size, extent,
// bounds, what Pack picks and what Unpack stores, and that a layout that
// calls itself contiguous is.
func checkRecipe(t *testing.T, r recipe) {
	t.Helper()
	l := r.build()
	if err := l.Err(); err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	want := r.naive(elemMap)
	if l.Size() != len(want.offs) {
		t.Fatalf("%s: Size %d, want %d", r.name, l.Size(), len(want.offs))
	}
	if len(want.offs) > 0 && (l.LowerBound() != want.lb || l.Extent() != want.ub-want.lb) {
		t.Fatalf("%s: lb %d extent %d, want %d %d", r.name, l.LowerBound(), l.Extent(), want.lb, want.ub-want.lb)
	}
	lo, hi := l.Span()
	if len(want.offs) > 0 && (lo != slices.Min(want.offs) || hi != slices.Max(want.offs)+1) {
		t.Fatalf("%s: Span [%d,%d), want [%d,%d)", r.name, lo, hi, slices.Min(want.offs), slices.Max(want.offs)+1)
	}
	if l.t.contig {
		for i, o := range want.offs {
			if o != lo+i {
				t.Fatalf("%s: contiguous, but its type map is %v", r.name, want.offs)
			}
		}
	}
	shift := max(0, -lo) // make every offset a valid index
	buf := make([]int32, hi+shift)
	for i := range buf {
		buf[i] = int32(i)
	}
	var at Layout = l
	if shift > 0 {
		at = Indexed([]int{1}, []int{shift}).Of(l.Resized(0, 1))
		if _, err := Pack(nil, buf[shift:], l); !errors.Is(err, ErrArg) {
			t.Fatalf("%s: Pack with a negative lower bound: %v, want ErrArg", r.name, err)
		}
	}
	got, err := Pack([]int32{-1}, buf, at)
	if err != nil {
		t.Fatalf("%s: Pack: %v", r.name, err)
	}
	for i, o := range want.offs {
		if got[1+i] != int32(o+shift) {
			t.Fatalf("%s: Pack gives %v, want offsets %v (+%d)", r.name, got[1:], want.offs, shift)
		}
	}
	back := make([]int32, len(buf))
	if n, err := Unpack(back, at, got[1:]); err != nil || n != len(want.offs) {
		t.Fatalf("%s: Unpack: %d %v", r.name, n, err)
	}
	sel := map[int]bool{}
	for _, o := range want.offs {
		sel[o+shift] = true
	}
	for i, v := range back {
		if sel[i] && v != int32(i) || !sel[i] && v != 0 {
			t.Fatalf("%s: Unpack stored %v", r.name, back)
		}
	}
}

func TestLayoutConstructors(t *testing.T) {
	for _, r := range []recipe{
		rContiguous(0), rContiguous(5),
		rVector(3, 1, 4), rVector(4, 2, 2), rVector(3, 2, -3), rVector(0, 2, 5), rVector(2, 0, 5),
		rIndexed([]int{2, 0, 1}, []int{5, 1, 0}), rIndexed(nil, nil),
		rIndexedBlock(2, []int{4, 0, 8}),
		rSubarray([]int{4, 5}, []int{2, 3}, []int{1, 2}, OrderC),
		rSubarray([]int{4, 5}, []int{2, 3}, []int{1, 2}, OrderFortran),
		rSubarray([]int{3, 4, 5}, []int{2, 1, 3}, []int{1, 3, 0}, OrderC),
		rSubarray([]int{3, 4}, []int{3, 4}, []int{0, 0}, OrderC),
		rSubarray([]int{3, 4}, []int{0, 4}, []int{1, 0}, OrderC),
		rOf(rVector(3, 1, 4), rContiguous(2)),
		rOf(rVector(2, 2, 3), rVector(2, 1, 3)),
		rOf(rContiguous(3), rResized(rVector(4, 1, 5), 0, 1)),
		rOf(rIndexed([]int{1, 2}, []int{3, 0}), rSubarray([]int{2, 3}, []int{1, 2}, []int{1, 0}, OrderC)),
		rResized(rVector(2, 1, 3), -1, 7),
	} {
		checkRecipe(t, r)
	}
}

func TestLayoutRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2))
	for range 3000 {
		checkRecipe(t, randRecipe(rng, 2))
	}
}

// TestLayoutFolding: compositions of dense layouts stay one node, and
// layouts that are one run say so, which lets them go without packing.
func TestLayoutFolding(t *testing.T) {
	if l := Vector(2, 1, 4).Of(Contiguous(3)); l.t.child != element || l.t.blen != 3 || l.t.stride != 12 {
		t.Errorf("Vector(2,1,4).Of(Contiguous(3)) = %+v, want Vector(2,3,12)", *l.t)
	}
	for _, l := range []Layout{
		Contiguous(7), Vector(3, 4, 4), IndexedBlock(2, []int{3, 5, 7}),
		Subarray([]int{6, 5}, []int{2, 5}, []int{3, 0}, OrderC),
		Subarray([]int{6, 5, 4}, []int{1, 2, 4}, []int{2, 3, 0}, OrderC),
		Contiguous(4).Of(Contiguous(3)), {},
	} {
		if !l.node().contig {
			t.Errorf("%+v: not seen as one run", *l.t)
		}
	}
	if Vector(3, 1, 4).t.contig || Indexed([]int{1, 1}, []int{1, 0}).t.contig {
		t.Error("a strided or reordered layout seen as one run")
	}
}

func TestLayoutErrors(t *testing.T) {
	for _, l := range []Layout{
		Contiguous(-1), Vector(-1, 1, 1), Vector(1, -1, 1),
		Indexed([]int{1}, []int{1, 2}), Indexed([]int{-1}, []int{0}), IndexedBlock(-2, nil),
		Subarray(nil, nil, nil, OrderC), Subarray([]int{4}, []int{2}, []int{3}, OrderC),
		Subarray([]int{4}, []int{5}, []int{0}, OrderC), Subarray([]int{0}, []int{0}, []int{0}, OrderC),
		Subarray([]int{4}, []int{2}, []int{0}, Order(7)), Subarray([]int{4, 4}, []int{2}, []int{0}, OrderC),
		Contiguous(3).Resized(0, -1), Vector(-1, 1, 1).Of(Contiguous(2)), Contiguous(2).Of(Vector(-1, 1, 1)),
		Vector(math.MaxInt/2, 1, 4), Contiguous(math.MaxInt / 2).Of(Contiguous(3).Resized(0, 5)),
	} {
		err := l.Err()
		if !errors.Is(err, ErrArg) {
			t.Errorf("Err() = %v, want ErrArg", err)
			continue
		}
		if _, perr := Pack(nil, make([]int, 8), l); !errors.Is(perr, ErrArg) {
			t.Errorf("Pack with %v: %v", err, perr)
		}
	}
	buf := make([]float64, 10)
	for _, l := range []Layout{Vector(3, 1, 5), Contiguous(11), IndexedBlock(1, []int{-1})} {
		if _, err := Pack(nil, buf, l); !errors.Is(err, ErrArg) {
			t.Errorf("Pack of %+v outside a slice of 10: %v, want ErrArg", *l.t, err)
		}
		if _, err := Unpack(buf, l, nil); !errors.Is(err, ErrArg) {
			t.Errorf("Unpack of %+v outside a slice of 10: %v, want ErrArg", *l.t, err)
		}
	}
	// Zero counts are fine, whatever the slice.
	for _, l := range []Layout{{}, Contiguous(0), Vector(0, 3, 100), Indexed(nil, nil)} {
		if got, err := Pack(nil, []int(nil), l); err != nil || len(got) != 0 {
			t.Errorf("empty layout: %v %v", got, err)
		}
	}
}

// TestLayoutPackAllocs: packing a column and unpacking it allocate
// nothing (Pack's own result aside).
func TestLayoutPackAllocs(t *testing.T) {
	const rows, cols = 64, 33
	grid := make([]float64, rows*cols)
	col := Vector(rows, 1, cols)
	out := make([]byte, rows*8)
	n := testing.AllocsPerRun(100, func() {
		col.t.pack(out, elemBytes(grid), 8)
		col.t.unpack(elemBytes(grid), out, 8)
	})
	if n != 0 {
		t.Errorf("pack and unpack of a column: %v allocations, want 0", n)
	}
	// The scratch comes from the pool, pointer and all (a garbage
	// collection may empty the pool now and then: less than one per call).
	n = testing.AllocsPerRun(100, func() {
		w, err := wireFor("test", grid, col, 0, true)
		if err != nil || w.own == nil {
			t.Fatalf("wireFor: %v %v", w.own, err)
		}
		w.unpackTo(elemBytes(grid), col, 8, len(w.b), nil)
		w.release()
	})
	if n >= 1 {
		t.Errorf("packing a column through pooled scratch: %v allocations per call, want none", n)
	}
}

func BenchmarkLayoutPack(b *testing.B) {
	const n = 512
	grid := make([]float64, n*n)
	for _, bc := range []struct {
		name string
		l    Layout
	}{
		{"column", Vector(n, 1, n)},
		{"tile", Subarray([]int{n, n}, []int{n / 2, n / 2}, []int{n / 4, n / 4}, OrderC)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			out := make([]byte, bc.l.Size()*8)
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				bc.l.t.pack(out, elemBytes(grid), 8)
			}
		})
	}
}

// BenchmarkSendrecvLayoutSelf: a 512-element column of a 512×512 grid
// sent and received as a column, against the same count contiguous, on a
// singleton world (btl/self): the cost of packing and unpacking.
func BenchmarkSendrecvLayoutSelf(b *testing.B) {
	if !Initialized() {
		if err := Init(); err != nil {
			b.Fatal(err)
		}
	}
	w := World()
	const n = 512
	grid, other := make([]float64, n*n), make([]float64, n*n)
	for _, bc := range []struct {
		name string
		l    Layout
	}{{"contiguous", Contiguous(n)}, {"column", Vector(n, 1, n)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(n * 8)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := SendrecvLayout(w, grid, bc.l, 0, 1, other, bc.l, 0, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
