package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Layouts (issue 16's datatypes): halo exchanges, subarray blocks,
// indexed layouts and layouts that differ between the two sides, against
// results computed sequentially, over shared memory and over tcp, with
// messages below and above both transports' eager limits.

func init() {
	rankCases["layout-halo"] = caseLayoutHalo
	rankCases["layout-blocks"] = caseLayoutBlocks
	rankCases["layout-p2p"] = caseLayoutP2P
}

// layoutJobs runs a rank case under every transport selection of the RMA
// tests (winBTLs: the default, sm between local ranks, and tcp forced).
func layoutJobs(t *testing.T, np int, cas string) {
	for _, b := range winBTLs {
		t.Run(b.name, func(t *testing.T) { winJob(np, cas, b.env).ok(t) })
	}
}

func TestLayoutHalo(t *testing.T)   { layoutJobs(t, 4, "layout-halo") }
func TestLayoutBlocks(t *testing.T) { layoutJobs(t, 3, "layout-blocks") }
func TestLayoutP2P(t *testing.T)    { layoutJobs(t, 2, "layout-p2p") }

// jacobi is one step of the 5-point average on a rows×cols interior
// framed by one ghost cell on every side (row length cols+2); the frame
// of the result is zero. Ranks and the sequential reference run this very
// code, so their results agree to the bit.
func jacobi(u []float64, rows, cols int) []float64 {
	w := cols + 2
	v := make([]float64, len(u))
	for i := 1; i <= rows; i++ {
		for j := 1; j <= cols; j++ {
			v[i*w+j] = (u[(i-1)*w+j] + u[(i+1)*w+j] + u[i*w+j-1] + u[i*w+j+1]) / 4
		}
	}
	return v
}

// haloSendrecv fills the ghost frame of u (lr×lc inside, row length
// lc+2) from the neighbours on a 2-D Cartesian c with SendrecvLayout: rows
// as Contiguous, columns as Vector, both over sub-slices of u.
func haloSendrecv[T int32 | float64](c *mpi.Comm, u []T, lr, lc int) error {
	W := lc + 2
	up, down, err := c.CartShift(0, 1)
	if err != nil {
		return err
	}
	left, right, err := c.CartShift(1, 1)
	if err != nil {
		return err
	}
	row, col := mpi.Contiguous(lc), mpi.Vector(lr, 1, W)
	for _, x := range []struct {
		send      []T
		l         mpi.Layout
		dest, tag int
		recv      []T
		source    int
	}{
		{u[W+1:], row, up, 1, u[(lr+1)*W+1:], down},
		{u[lr*W+1:], row, down, 2, u[1:], up},
		{u[W+1:], col, left, 3, u[W+lc+1:], right},
		{u[W+lc:], col, right, 4, u[W:], left},
	} {
		st, err := mpi.SendrecvLayout(c, x.send, x.l, x.dest, x.tag, x.recv, x.l, x.source, x.tag)
		if err != nil {
			return fmt.Errorf("SendrecvLayout tag %d: %w", x.tag, err)
		}
		if want := x.l.Size(); x.source != mpi.ProcNull && st.Count() != want {
			return fmt.Errorf("SendrecvLayout tag %d: Count %d, want %d", x.tag, st.Count(), want)
		}
	}
	return nil
}

func haloValue(gi, gj int) float64 { return float64((gi*7919+gj*104729)%1000) / 8 }

// caseLayoutHalo: a Jacobi iteration on a grid split over a 2-D
// Cartesian grid of ranks (fixed zero boundary), compared with the whole
// grid iterated by one rank. Even steps exchange the halo with
// SendrecvLayout, rows as Contiguous and columns as Vector over
// sub-slices; odd steps with IrecvLayout and IsendLayout, every side a
// Subarray of the whole local grid. Two shapes: small (eager everywhere)
// and 2200 rows (a column is 17.6 KB, past sm's 16 KiB eager limit).
func caseLayoutHalo(w *mpi.Comm) error {
	dims, err := mpi.DimsCreate(w.Size(), []int{0, 0})
	if err != nil {
		return err
	}
	cart, err := mpi.CartCreate(w, dims, []bool{false, false}, false)
	if err != nil {
		return err
	}
	defer cart.Free()
	for _, sh := range []struct{ lr, lc, steps int }{{6, 5, 4}, {2200, 3, 2}} {
		if err := haloRun(cart, dims, sh.lr, sh.lc, sh.steps); err != nil {
			return fmt.Errorf("%d×%d per rank: %w", sh.lr, sh.lc, err)
		}
	}
	return nil
}

func haloRun(cart *mpi.Comm, dims []int, lr, lc, steps int) error {
	coords, err := cart.CartCoords(cart.Rank())
	if err != nil {
		return err
	}
	up, down, err := cart.CartShift(0, 1)
	if err != nil {
		return err
	}
	left, right, err := cart.CartShift(1, 1)
	if err != nil {
		return err
	}
	// The whole grid, iterated sequentially.
	gr, gc := dims[0]*lr, dims[1]*lc
	g := make([]float64, (gr+2)*(gc+2))
	for i := range gr {
		for j := range gc {
			g[(i+1)*(gc+2)+j+1] = haloValue(i, j)
		}
	}
	for range steps {
		g = jacobi(g, gr, gc)
	}
	// This rank's part, with its ghost frame.
	W := lc + 2
	u := make([]float64, (lr+2)*W)
	for i := range lr {
		for j := range lc {
			u[(i+1)*W+j+1] = haloValue(coords[0]*lr+i, coords[1]*lc+j)
		}
	}
	sub := func(r0, c0, nr, nc int) mpi.Layout {
		return mpi.Subarray([]int{lr + 2, W}, []int{nr, nc}, []int{r0, c0}, mpi.OrderC)
	}
	for s := range steps {
		if s%2 == 0 {
			if err := haloSendrecv(cart, u, lr, lc); err != nil {
				return fmt.Errorf("step %d: %w", s, err)
			}
		} else {
			var reqs []*mpi.Request
			for _, x := range []struct {
				l           mpi.Layout
				source, tag int
			}{{sub(lr+1, 1, 1, lc), down, 1}, {sub(0, 1, 1, lc), up, 2}, {sub(1, lc+1, lr, 1), right, 3}, {sub(1, 0, lr, 1), left, 4}} {
				q, err := mpi.IrecvLayout(cart, u, x.l, x.source, x.tag)
				if err != nil {
					return fmt.Errorf("step %d: IrecvLayout tag %d: %w", s, x.tag, err)
				}
				reqs = append(reqs, q)
			}
			for _, x := range []struct {
				l         mpi.Layout
				dest, tag int
			}{{sub(1, 1, 1, lc), up, 1}, {sub(lr, 1, 1, lc), down, 2}, {sub(1, 1, lr, 1), left, 3}, {sub(1, lc, lr, 1), right, 4}} {
				q, err := mpi.IsendLayout(cart, u, x.l, x.dest, x.tag)
				if err != nil {
					return fmt.Errorf("step %d: IsendLayout tag %d: %w", s, x.tag, err)
				}
				reqs = append(reqs, q)
			}
			sts, err := mpi.Waitall(reqs)
			if err != nil {
				return fmt.Errorf("step %d: Waitall: %w", s, err)
			}
			for i, src := range []int{down, up, right, left} {
				if want := []int{lc, lc, lr, lr}[i]; src != mpi.ProcNull && sts[i].Count() != want {
					return fmt.Errorf("step %d: receive from %d: Count %d, want %d", s, src, sts[i].Count(), want)
				}
			}
		}
		u = jacobi(u, lr, lc)
	}
	for i := range lr {
		for j := range lc {
			gi, gj := coords[0]*lr+i, coords[1]*lc+j
			if got, want := u[(i+1)*W+j+1], g[(gi+1)*(gc+2)+gj+1]; got != want {
				return fmt.Errorf("after %d steps, point (%d,%d) is %v, want %v", steps, gi, gj, got, want)
			}
		}
	}
	return nil
}

// caseLayoutBlocks: around a ring, every rank sends a Subarray tile of
// its matrix to the next and receives the previous rank's into another
// place of another matrix, small and large (a 120×90 tile of float64 is
// 86 KB, past every eager limit); then a face of a 3-D Fortran-order
// array, received contiguously and compared with the face walked index by
// index.
func caseLayoutBlocks(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	next, prev := (me+1)%n, (me+n-1)%n
	val := func(r, i int) float64 { return float64(r*1000000 + i) }
	for _, c := range []struct{ rows, cols, h, wd, r0, c0, r1, c1 int }{
		{4, 5, 2, 3, 1, 1, 2, 0},
		{200, 150, 120, 90, 30, 7, 80, 60},
	} {
		a := make([]float64, c.rows*c.cols)
		for i := range a {
			a[i] = val(me, i)
		}
		b := slices.Repeat([]float64{-1}, c.rows*c.cols)
		size := []int{c.rows, c.cols}
		from := mpi.Subarray(size, []int{c.h, c.wd}, []int{c.r0, c.c0}, mpi.OrderC)
		to := mpi.Subarray(size, []int{c.h, c.wd}, []int{c.r1, c.c1}, mpi.OrderC)
		st, err := mpi.SendrecvLayout(w, a, from, next, 1, b, to, prev, 1)
		if err != nil {
			return err
		}
		if st.Count() != c.h*c.wd || st.Source != prev {
			return fmt.Errorf("tile %d×%d: status %+v, count %d", c.h, c.wd, st, st.Count())
		}
		for i := range c.rows {
			for j := range c.cols {
				want := -1.0
				if i >= c.r1 && i < c.r1+c.h && j >= c.c1 && j < c.c1+c.wd {
					want = val(prev, (i-c.r1+c.r0)*c.cols+j-c.c1+c.c0)
				}
				if got := b[i*c.cols+j]; got != want {
					return fmt.Errorf("tile %d×%d: b[%d][%d] = %v, want %v", c.h, c.wd, i, j, got, want)
				}
			}
		}
	}
	// A 3-D array of 6×5×4 in Fortran order (index (x, y, z) at x + 6y +
	// 30z): the y = 2 face, sent as a Subarray, received contiguously.
	sizes := []int{6, 5, 4}
	arr := make([]int64, 6*5*4)
	for i := range arr {
		arr[i] = int64(me*1000 + i)
	}
	face := mpi.Subarray(sizes, []int{6, 1, 4}, []int{0, 2, 0}, mpi.OrderFortran)
	got := make([]int64, 24)
	if _, err := mpi.SendrecvLayout(w, arr, face, next, 2, got, mpi.Contiguous(24), prev, 2); err != nil {
		return err
	}
	k := 0
	for z := range 4 {
		for x := range 6 {
			if want := int64(prev*1000 + x + 6*2 + 30*z); got[k] != want {
				return fmt.Errorf("3-D face: element %d is %d, want %d (got %v)", k, got[k], want, got)
			}
			k++
		}
	}
	return nil
}

// caseLayoutP2P (2 ranks): layouts that differ on the two sides (a column
// received contiguously, contiguous data received as a column, Indexed
// into IndexedBlock), a short message filling the first elements of a
// layout, a long one truncated, Ssend, a send buffer changed right after
// IsendLayout returned, ProcNull and empty layouts.
func caseLayoutP2P(w *mpi.Comm) error {
	if w.Size() != 2 {
		return fmt.Errorf("layout-p2p runs on 2 ranks, not %d", w.Size())
	}
	me := w.Rank()
	other := 1 - me
	// A 5×4 matrix of rank 0; the column and the contiguous run.
	m := make([]int32, 20)
	for i := range m {
		m[i] = int32(100 + i)
	}
	col2 := mpi.Vector(5, 1, 4)
	colVals := []int32{102, 106, 110, 114, 118}
	switch me {
	case 0:
		if err := mpi.SendLayout(w, m[2:], col2, 1, 1); err != nil {
			return err
		}
		if err := mpi.SendLayout(w, colVals, mpi.Contiguous(5), 1, 2); err != nil {
			return err
		}
		if err := mpi.SendLayout(w, m, mpi.Indexed([]int{2, 1, 3}, []int{0, 5, 9}), 1, 3); err != nil {
			return err
		}
		if err := mpi.SsendLayout(w, m, mpi.IndexedBlock(1, []int{19, 0}), 1, 4); err != nil {
			return err
		}
		if err := mpi.SendLayout(w, m, mpi.Vector(10, 1, 2), 1, 5); err != nil { // 10 into 6
			return err
		}
		buf := []int32{1, 2, 3, 4, 5, 6}
		q, err := mpi.IsendLayout(w, buf, mpi.Vector(3, 1, 2), 1, 6)
		if err != nil {
			return err
		}
		// Packed before IsendLayout returned: changing buf now changes
		// nothing that is sent.
		clear(buf)
		if _, err := q.Wait(); err != nil {
			return err
		}
	case 1:
		check := func(what string, st mpi.Status, err error, count int, got, want []int32) error {
			if err != nil || st.Count() != count || st.Source != 0 || !slices.Equal(got, want) {
				return fmt.Errorf("%s: %v, count %d, %v; want count %d, %v", what, err, st.Count(), got, count, want)
			}
			return nil
		}
		row := make([]int32, 5)
		st, err := mpi.RecvLayout(w, row, mpi.Contiguous(5), 0, 1)
		if err := check("column into a row", st, err, 5, row, colVals); err != nil {
			return err
		}
		grid := slices.Repeat([]int32{-1}, 20)
		st, err = mpi.RecvLayout(w, grid[1:], col2, 0, 2)
		want := slices.Repeat([]int32{-1}, 20)
		for i, v := range colVals {
			want[1+4*i] = v
		}
		if err := check("row into a column", st, err, 5, grid, want); err != nil {
			return err
		}
		d := slices.Repeat([]int32{-1}, 16)
		q, err := mpi.IrecvLayout(w, d, mpi.IndexedBlock(2, []int{1, 7, 13}), 0, 3)
		if err != nil {
			return err
		}
		st, err = q.Wait()
		if err := check("Indexed into IndexedBlock", st, err, 6, d, []int32{-1, 100, 101, -1, -1, -1, -1, 105, 109, -1, -1, -1, -1, 110, 111, -1}); err != nil {
			return err
		}
		// Two elements into a layout of four: the first two places.
		e := slices.Repeat([]int32{-1}, 8)
		st, err = mpi.RecvLayout(w, e, mpi.Vector(4, 1, 2), 0, 4)
		if err := check("short message", st, err, 2, e, []int32{119, -1, 100, -1, -1, -1, -1, -1}); err != nil {
			return err
		}
		// Ten elements into a layout of six: ErrTruncate, six stored.
		f := slices.Repeat([]int32{-1}, 12)
		st, err = mpi.RecvLayout(w, f, mpi.Vector(6, 1, 2), 0, 5)
		if !errors.Is(err, mpi.ErrTruncate) || st.Count() != 6 {
			return fmt.Errorf("long message: %v, count %d; want ErrTruncate, 6", err, st.Count())
		}
		if want := []int32{100, -1, 102, -1, 104, -1, 106, -1, 108, -1, 110, -1}; !slices.Equal(f, want) {
			return fmt.Errorf("truncated receive stored %v, want %v", f, want)
		}
		g := make([]int32, 3)
		st, err = mpi.RecvLayout(w, g, mpi.Contiguous(3), 0, 6)
		if err := check("IsendLayout's packed data", st, err, 3, g, []int32{1, 3, 5}); err != nil {
			return err
		}
	}
	// ProcNull moves nothing; empty layouts send empty messages.
	if err := mpi.SendLayout(w, m, mpi.Vector(2, 1, 3), mpi.ProcNull, 0); err != nil {
		return fmt.Errorf("SendLayout to ProcNull: %v", err)
	}
	if st, err := mpi.RecvLayout(w, m, mpi.Vector(2, 1, 3), mpi.ProcNull, 0); err != nil || st.Source != mpi.ProcNull || m[0] != 100 {
		return fmt.Errorf("RecvLayout from ProcNull: %+v %v", st, err)
	}
	st, err := mpi.SendrecvLayout(w, []float64(nil), mpi.Layout{}, other, 7, []float64(nil), mpi.Vector(0, 5, 9), other, 7)
	if err != nil || st.Count() != 0 || st.Source != other {
		return fmt.Errorf("empty layouts: %+v %v", st, err)
	}
	return nil
}
