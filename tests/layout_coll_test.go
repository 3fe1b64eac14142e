package tests

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Layouts in collectives, bad layouts, and the comparison with Open MPI's
// derived datatypes (tests/openmpi/layout.c).

func init() {
	rankCases["layout-coll"] = caseLayoutColl
	rankCases["layout-errors"] = caseLayoutErrors
	rankCases["layout-ref"] = caseLayoutRef
}

func TestLayoutColl(t *testing.T)   { layoutJobs(t, 4, "layout-coll") }
func TestLayoutErrors(t *testing.T) { layoutJobs(t, 3, "layout-errors") }

// TestLayoutAgainstOpenMPI: caseLayoutRef prints, at np 4 and 3, the
// lines tests/openmpi/layout.c prints under Open MPI (integers, exactly).
func TestLayoutAgainstOpenMPI(t *testing.T) {
	for _, np := range []int{4, 3} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			want := mpirun(t, np, filepath.Join(openmpi(t), "layout"))
			got := job{np: np, cas: "layout-ref"}.ok(t).stdout
			if got != want {
				t.Fatalf("gorun:\n%s\nOpen MPI:\n%s", got, want)
			}
		})
	}
}

// caseLayoutColl: BcastLayout, GatherLayout, ScatterLayout and
// AllgatherLayout from every root, strided on one side and contiguous or
// differently strided on the other, small and large (a strided broadcast
// of 20000 float64, 160 KB).
func caseLayoutColl(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	mat := func(r int) []int64 { // a 4×5 matrix of rank r
		m := make([]int64, 20)
		for i := range m {
			m[i] = int64(r*100 + i)
		}
		return m
	}
	col5 := mpi.Vector(4, 1, 5)
	for root := range n {
		// Root's column 2 into everyone else's column 4.
		e := slices.Repeat([]int64{-1}, 20)
		buf := e[4:]
		if me == root {
			buf = mat(root)[2:]
		}
		if err := mpi.BcastLayout(w, buf, col5, root); err != nil {
			return fmt.Errorf("BcastLayout root %d: %w", root, err)
		}
		if me != root {
			for i := range e {
				want := int64(-1)
				if i%5 == 4 {
					want = int64(root*100 + i/5*5 + 2)
				}
				if e[i] != want {
					return fmt.Errorf("BcastLayout root %d: %v", root, e)
				}
			}
		}
		// Rank r's column 1, gathered as column r of a 4×n matrix.
		colN := mpi.Vector(4, 1, n).Resized(0, 1)
		g := slices.Repeat([]int64{-1}, 4*n)
		if err := mpi.GatherLayout(w, mat(me)[1:], col5, g, colN, root); err != nil {
			return fmt.Errorf("GatherLayout root %d: %w", root, err)
		}
		if me == root {
			for k := range 4 {
				for r := range n {
					if want := int64(r*100 + k*5 + 1); g[k*n+r] != want {
						return fmt.Errorf("GatherLayout root %d: %v", root, g)
					}
				}
			}
		}
		// And back: column r to rank r, stored backwards one slot apart.
		h := slices.Repeat([]int64{-1}, 8)
		rev := mpi.IndexedBlock(1, []int{7, 5, 3, 1})
		if err := mpi.ScatterLayout(w, g, colN, h, rev, root); err != nil {
			return fmt.Errorf("ScatterLayout root %d: %w", root, err)
		}
		for k := range 4 {
			if want := int64(me*100 + k*5 + 1); h[7-2*k] != want || h[6-2*k] != -1 {
				return fmt.Errorf("ScatterLayout root %d: %v", root, h)
			}
		}
		// A strided broadcast past every eager limit.
		big := make([]float64, 3*20000)
		if me == root {
			for i := range big {
				big[i] = float64(root*1000000 + i)
			}
		}
		if err := mpi.BcastLayout(w, big[1:], mpi.Vector(20000, 1, 3), root); err != nil {
			return fmt.Errorf("BcastLayout of 20000 root %d: %w", root, err)
		}
		for i, v := range big {
			want := 0.0
			if me == root || i%3 == 1 {
				want = float64(root*1000000 + i)
			}
			if v != want {
				return fmt.Errorf("BcastLayout of 20000 root %d: element %d is %v, want %v", root, i, v, want)
			}
		}
	}
	// Every rank's column 3, gathered contiguously everywhere, and into
	// every other element.
	all := slices.Repeat([]int64{-1}, 4*n)
	if err := mpi.AllgatherLayout(w, mat(me)[3:], col5, all, mpi.Contiguous(4)); err != nil {
		return err
	}
	// Vector(4, 1, 2) spans 7 elements: resized, blocks are 8 apart.
	spread := slices.Repeat([]int64{-1}, 8*n)
	if err := mpi.AllgatherLayout(w, mat(me)[3:], col5, spread, mpi.Vector(4, 1, 2).Resized(0, 8)); err != nil {
		return err
	}
	for r := range n {
		for k := range 4 {
			want := int64(r*100 + k*5 + 3)
			if all[r*4+k] != want || spread[r*8+2*k] != want || spread[r*8+2*k+1] != -1 {
				return fmt.Errorf("AllgatherLayout: %v and %v", all, spread)
			}
		}
	}
	return nil
}

// caseLayoutErrors (3 ranks): a layout outside its slice, a layout built
// from bad arguments and one below index 0 fail every call with ErrArg
// and a message that says why, without sending anything (the next message
// with the same tag is the real one); a collective with a bad layout at
// one rank fails there and leaves the communicator usable; a gather whose
// per-rank layouts differ in size fails with ErrCount at the root.
func caseLayoutErrors(w *mpi.Comm) error {
	me := w.Rank()
	ten := make([]float64, 10)
	outside := mpi.Vector(3, 1, 5) // reaches index 10
	want := func(what string, err error, class error, text string) error {
		if !errors.Is(err, class) || !strings.Contains(fmt.Sprint(err), text) {
			return fmt.Errorf("%s: %v, want %v saying %q", what, err, class, text)
		}
		return nil
	}
	peer := (me + 1) % 3
	from := (me + 2) % 3
	for _, l := range []struct {
		l    mpi.Layout
		text string
	}{
		{outside, "outside a slice of 10"},
		{mpi.Vector(-1, 1, 1), "Vector: negative count"},
		{mpi.Indexed([]int{1}, []int{-1}), "spans elements -1"},
		{mpi.Subarray([]int{4}, []int{5}, []int{0}, mpi.OrderC), "Subarray"},
	} {
		if err := want("SendLayout", mpi.SendLayout(w, ten, l.l, peer, 0), mpi.ErrArg, l.text); err != nil {
			return err
		}
		if err := want("SsendLayout", mpi.SsendLayout(w, ten, l.l, peer, 0), mpi.ErrArg, l.text); err != nil {
			return err
		}
		_, err := mpi.RecvLayout(w, ten, l.l, from, 0)
		if err := want("RecvLayout", err, mpi.ErrArg, l.text); err != nil {
			return err
		}
		if q, err := mpi.IsendLayout(w, ten, l.l, peer, 0); q != nil || want("IsendLayout", err, mpi.ErrArg, l.text) != nil {
			return fmt.Errorf("IsendLayout: %v %v", q, err)
		}
		if q, err := mpi.IrecvLayout(w, ten, l.l, from, 0); q != nil || want("IrecvLayout", err, mpi.ErrArg, l.text) != nil {
			return fmt.Errorf("IrecvLayout: %v %v", q, err)
		}
		_, err = mpi.SendrecvLayout(w, ten, mpi.Contiguous(2), peer, 0, ten, l.l, from, 0)
		if err := want("SendrecvLayout (receive side)", err, mpi.ErrArg, l.text); err != nil {
			return err
		}
		_, err = mpi.SendrecvLayout(w, ten, l.l, peer, 0, ten, mpi.Contiguous(2), from, 0)
		if err := want("SendrecvLayout (send side)", err, mpi.ErrArg, l.text); err != nil {
			return err
		}
		if _, err := mpi.Pack(nil, ten, l.l); err == nil {
			return fmt.Errorf("Pack with %s: no error", l.text)
		}
	}
	// Nothing of the failed calls went out: the first tag-0 message is
	// this one.
	out := []float64{float64(me), 42}
	got := make([]float64, 4)
	st, err := mpi.SendrecvLayout(w, out, mpi.Contiguous(2), peer, 0, got, mpi.Vector(2, 1, 2), from, 0)
	if err != nil || st.Count() != 2 || got[0] != float64(from) || got[2] != 42 {
		return fmt.Errorf("exchange after the failed calls: %v %v, count %d", got, err, st.Count())
	}

	// A collective with a bad layout at rank 1: ErrArg there; the others
	// may fail or complete. It runs on a communicator of its own: after
	// any collective that fails at one rank only (a plain Bcast with a
	// bad root too), the next Barrier on that communicator fails with
	// mismatched counts, which is not the layouts' doing.
	d, err := w.Dup()
	if err != nil {
		return err
	}
	l := mpi.Vector(3, 1, 3)
	if me == 1 {
		l = outside
	}
	err = mpi.BcastLayout(d, ten, l, 0)
	if me == 1 {
		if err := want("BcastLayout with a bad layout", err, mpi.ErrArg, "outside a slice of 10"); err != nil {
			return err
		}
	}
	// At the root, per-rank blocks of 3 for sends of 2: ErrCount.
	rl := mpi.Contiguous(2)
	if me == 0 {
		rl = mpi.Contiguous(3)
	}
	err = mpi.GatherLayout(d, []int{1, 2}, mpi.Contiguous(2), make([]int, 9), rl, 0)
	if me == 0 {
		if err := want("GatherLayout with mismatched sizes", err, mpi.ErrCount, "a block of 3 elements"); err != nil {
			return err
		}
	}
	if err := d.Free(); err != nil {
		return err
	}
	v := make([]int, 9)
	if me == 2 {
		v = []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	}
	if err := mpi.BcastLayout(w, v, mpi.Vector(3, 1, 3), 2); err != nil || v[3] != 4 || v[6] != 7 {
		return fmt.Errorf("BcastLayout after a failed one: %v %v", v, err)
	}
	return nil
}

// caseLayoutRef is tests/openmpi/layout.c in Go, printing the same lines
// at rank 0.
func caseLayoutRef(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	next, prev := (me+1)%n, (me+n-1)%n
	out := func(what string, buf []int32) error {
		line := fmt.Sprintf("%s rank %d:", what, me)
		for _, v := range buf {
			line += fmt.Sprintf(" %d", v)
		}
		all, err := mpi.GatherObj(w, line, 0)
		if me == 0 {
			for _, l := range all {
				fmt.Println(l)
			}
		}
		return err
	}
	fill := func(k int) []int32 { return slices.Repeat([]int32{-1}, k) }

	// 1. The halo exchange: rows contiguous, columns as a vector.
	const lr, lc, W, steps = 3, 4, 6, 3
	dims, err := mpi.DimsCreate(n, []int{0, 0})
	if err != nil {
		return err
	}
	cart, err := mpi.CartCreate(w, dims, []bool{false, false}, false)
	if err != nil {
		return err
	}
	defer cart.Free()
	coords, _ := cart.CartCoords(me)
	u := make([]int32, (lr+2)*W)
	for i := range lr {
		for j := range lc {
			gi, gj := coords[0]*lr+i, coords[1]*lc+j
			u[(i+1)*W+j+1] = int32((gi*31 + gj*17) % 23)
		}
	}
	for range steps {
		if err := haloSendrecv(cart, u, lr, lc); err != nil {
			return err
		}
		v := slices.Clone(u)
		for i := 1; i <= lr; i++ {
			for j := 1; j <= lc; j++ {
				v[i*W+j] = (u[i*W+j] + u[(i-1)*W+j] + u[(i+1)*W+j] + u[i*W+j-1] + u[i*W+j+1]) % 1000
			}
		}
		u = v
	}
	interior := mpi.Subarray([]int{lr + 2, W}, []int{lr, lc}, []int{1, 1}, mpi.OrderC)
	mine := make([]int32, lr*lc)
	if _, err := mpi.SendrecvLayout(w, u, interior, me, 5, mine, mpi.Contiguous(lr*lc), me, 5); err != nil {
		return err
	}
	if err := out("halo", mine); err != nil {
		return err
	}

	// 2. A C-order tile into a Fortran-order block.
	a := make([]int32, 20)
	for i := range 4 {
		for j := range 5 {
			a[i*5+j] = int32(100*me + 10*i + j)
		}
	}
	b := fill(20)
	tile := mpi.Subarray([]int{4, 5}, []int{2, 3}, []int{1, 1}, mpi.OrderC)
	ftile := mpi.Subarray([]int{5, 4}, []int{3, 2}, []int{2, 0}, mpi.OrderFortran)
	if _, err := mpi.SendrecvLayout(w, a, tile, next, 6, b, ftile, prev, 6); err != nil {
		return err
	}
	if err := out("tile", b); err != nil {
		return err
	}

	// 3. Indexed into IndexedBlock.
	d := fill(20)
	idx := mpi.Indexed([]int{2, 1, 3}, []int{0, 5, 9})
	if _, err := mpi.SendrecvLayout(w, a, idx, prev, 7, d, mpi.IndexedBlock(2, []int{1, 7, 13}), next, 7); err != nil {
		return err
	}
	if err := out("indexed", d); err != nil {
		return err
	}

	// 4. Root's column 2 into column 4.
	col5 := mpi.Vector(4, 1, 5)
	e := fill(20)
	bc, shown := e[4:], e
	if me == 0 {
		bc, shown = a[2:], a
	}
	if err := mpi.BcastLayout(w, bc, col5, 0); err != nil {
		return err
	}
	if err := out("bcast", shown); err != nil {
		return err
	}

	// 5. Gathered as columns; 6. scattered back, backwards.
	s4 := make([]int32, 4)
	for k := range s4 {
		s4[k] = int32(me*10 + k)
	}
	gcolr := mpi.Vector(4, 1, n).Resized(0, 1)
	g := fill(4 * n)
	if err := mpi.GatherLayout(w, s4, mpi.Contiguous(4), g, gcolr, 0); err != nil {
		return err
	}
	if err := out("gather", g); err != nil {
		return err
	}
	h := fill(8)
	if err := mpi.ScatterLayout(w, g, gcolr, h, mpi.IndexedBlock(1, []int{7, 5, 3, 1}), 0); err != nil {
		return err
	}
	if err := out("scatter", h); err != nil {
		return err
	}

	// 7. Column 1 of every rank, contiguously everywhere.
	all := fill(4 * n)
	if err := mpi.AllgatherLayout(w, a[1:], col5, all, mpi.Contiguous(4)); err != nil {
		return err
	}
	if err := out("allgather", all); err != nil {
		return err
	}
	if me == 0 {
		fmt.Println("done")
	}
	return nil
}
