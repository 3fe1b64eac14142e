// Heat solves the steady 2-D heat equation on a square plate by Jacobi
// iteration, the way an MPI code does it: the grid is split into blocks
// over a Cartesian communicator (mpi.DimsCreate, mpi.CartCreate), each
// iteration exchanges one-cell halos with the four neighbours (found with
// CartShift) and agrees on the global residual with an Allreduce; at the
// end the blocks are gathered (Gatherv) and rank 0 prints a checksum of
// the whole grid.
//
//	gorun -np 4 ./examples/heat -n 256 -iters 2000
//	./heat -serial -n 256 -iters 2000      # the same grid, one plain loop
//
// The plate's left edge is held at 1, the other edges at 0; the interior
// starts at 0. One sweep sets every interior cell to
// 0.25*((up+down)+(left+right)) of the previous iterate; the residual is
// the largest change of a cell in the sweep, and the iteration stops when
// it falls below -tol or after -iters sweeps.
//
// The parallel run prints exactly what the serial one (-serial) prints,
// bit for bit: every cell is computed by the same expression from the same
// values whatever the decomposition, and the residual is a maximum, which
// does not depend on the order its terms are combined in (a sum, such as
// an L2 norm by Allreduce, would: it would then match only within a
// relative ~n·2^-53). The checksum is computed by rank 0 over the gathered
// grid in row-major order, so it too is independent of the decomposition.
package main

import (
	"flag"
	"fmt"
	"hash/fnv"
	"log"
	"math"
	"os"

	"github.com/gorun/gorun/mpi"
)

var (
	size   = flag.Int("n", 128, "interior cells per side")
	iters  = flag.Int("iters", 1000, "largest number of sweeps")
	tol    = flag.Float64("tol", 1e-6, "stop once the largest change in a sweep is below this")
	serial = flag.Bool("serial", false, "run the plain serial solver instead (no MPI decomposition)")
)

// sweep computes one Jacobi sweep of the rows×cols interior of u (a grid
// with a one-cell border, row stride cols+2) into v, and returns the
// largest change.
func sweep(u, v []float64, rows, cols int) float64 {
	s := cols + 2
	res := 0.0
	for i := 1; i <= rows; i++ {
		for j := 1; j <= cols; j++ {
			k := i*s + j
			x := 0.25 * ((u[k-s] + u[k+s]) + (u[k-1] + u[k+1]))
			v[k] = x
			res = max(res, math.Abs(x-u[k]))
		}
	}
	return res
}

// report prints the outcome: the sweeps done, the last residual and a
// checksum of the n×n interior (row-major).
func report(n, it int, res float64, grid []float64) {
	h := fnv.New64a()
	sum := 0.0
	var b [8]byte
	for _, x := range grid {
		sum += x
		bits := math.Float64bits(x)
		for i := range b {
			b[i] = byte(bits >> (8 * i))
		}
		h.Write(b[:])
	}
	fmt.Printf("grid %dx%d: %d sweeps, residual %.17g\n", n, n, it, res)
	fmt.Printf("checksum %.17g fnv64a %016x\n", sum, h.Sum64())
}

func runSerial(n int) {
	s := n + 2
	u, v := make([]float64, s*s), make([]float64, s*s)
	for i := 0; i < s; i++ {
		u[i*s], v[i*s] = 1, 1
	}
	it, res := 0, math.Inf(1)
	for it < *iters && res >= *tol {
		res = sweep(u, v, n, n)
		u, v = v, u
		it++
	}
	grid := make([]float64, 0, n*n)
	for i := 1; i <= n; i++ {
		grid = append(grid, u[i*s+1:i*s+1+n]...)
	}
	report(n, it, res, grid)
}

// span is the part [lo, hi) of n cells that block c of d gets.
func span(n, d, c int) (lo, hi int) { return c * n / d, (c + 1) * n / d }

func main() {
	flag.Parse()
	n := *size
	if n < 1 {
		log.Fatal("heat: -n must be positive")
	}
	if *serial {
		runSerial(n)
		return
	}
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	w := mpi.World()
	dims, err := mpi.DimsCreate(w.Size(), []int{0, 0})
	must(err)
	if dims[0] > n || dims[1] > n {
		log.Fatalf("heat: a %dx%d grid of ranks for %d cells per side", dims[0], dims[1], n)
	}
	c, err := mpi.CartCreate(w, dims, []bool{false, false}, true)
	must(err)
	_, _, coords, err := c.CartGet()
	must(err)
	r0, r1 := span(n, dims[0], coords[0])
	c0, c1 := span(n, dims[1], coords[1])
	rows, cols := r1-r0, c1-c0
	s := cols + 2
	u, v := make([]float64, (rows+2)*s), make([]float64, (rows+2)*s)
	if c0 == 0 { // the left edge of the plate
		for i := 0; i < rows+2; i++ {
			u[i*s], v[i*s] = 1, 1
		}
	}
	up, down, err := c.CartShift(0, 1)
	must(err)
	left, right, err := c.CartShift(1, 1)
	must(err)
	if c.Rank() == 0 {
		fmt.Fprintf(os.Stderr, "heat: %d ranks as %dx%d blocks\n", c.Size(), dims[0], dims[1])
	}

	colOut := [2][]float64{make([]float64, rows), make([]float64, rows)}
	colIn := [2][]float64{make([]float64, rows), make([]float64, rows)}
	it, res := 0, math.Inf(1)
	for it < *iters && res >= *tol {
		must(halo(c, u, rows, cols, up, down, left, right, colOut, colIn))
		local := []float64{sweep(u, v, rows, cols)}
		must(mpi.Allreduce(c, local, local, mpi.Max))
		res = local[0]
		u, v = v, u
		it++
	}

	// Gather the blocks at rank 0 and put them in place.
	mine := make([]float64, 0, rows*cols)
	for i := 1; i <= rows; i++ {
		mine = append(mine, u[i*s+1:i*s+1+cols]...)
	}
	p := c.Size()
	counts, displs := make([]int, p), make([]int, p)
	total := 0
	for r := range p {
		rc, err := c.CartCoords(r)
		must(err)
		a, b := span(n, dims[0], rc[0])
		x, y := span(n, dims[1], rc[1])
		counts[r], displs[r] = (b-a)*(y-x), total
		total += counts[r]
	}
	var all []float64
	if c.Rank() == 0 {
		all = make([]float64, n*n)
	}
	must(mpi.Gatherv(c, mine, all, counts, displs, 0))
	if c.Rank() != 0 {
		return
	}
	grid := make([]float64, n*n)
	for r := range p {
		rc, _ := c.CartCoords(r)
		a, b := span(n, dims[0], rc[0])
		x, y := span(n, dims[1], rc[1])
		blk := all[displs[r] : displs[r]+counts[r]]
		for i := a; i < b; i++ {
			copy(grid[i*n+x:i*n+y], blk[(i-a)*(y-x):])
		}
	}
	report(n, it, res, grid)
}

// halo exchanges the block's edge rows and columns with its four
// neighbours (mpi.ProcNull past the plate's edges, where the fixed
// boundary stays).
func halo(c *mpi.Comm, u []float64, rows, cols, up, down, left, right int, colOut, colIn [2][]float64) error {
	s := cols + 2
	var reqs []*mpi.Request
	post := func(q *mpi.Request, err error) error {
		reqs = append(reqs, q)
		return err
	}
	// Rows are contiguous: receive straight into the halo rows.
	if up != mpi.ProcNull {
		if err := post(mpi.Irecv(c, u[1:1+cols], up, 0)); err != nil {
			return err
		}
		if err := post(mpi.Isend(c, u[s+1:s+1+cols], up, 1)); err != nil {
			return err
		}
	}
	if down != mpi.ProcNull {
		if err := post(mpi.Irecv(c, u[(rows+1)*s+1:(rows+1)*s+1+cols], down, 1)); err != nil {
			return err
		}
		if err := post(mpi.Isend(c, u[rows*s+1:rows*s+1+cols], down, 0)); err != nil {
			return err
		}
	}
	// Columns are strided: pack them.
	for k, nb := range []int{left, right} {
		if nb == mpi.ProcNull {
			continue
		}
		j := 1 + k*(cols-1)
		for i := range rows {
			colOut[k][i] = u[(i+1)*s+j]
		}
		if err := post(mpi.Irecv(c, colIn[k], nb, 2+(1-k))); err != nil {
			return err
		}
		if err := post(mpi.Isend(c, colOut[k], nb, 2+k)); err != nil {
			return err
		}
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	for k, nb := range []int{left, right} {
		if nb == mpi.ProcNull {
			continue
		}
		j := k * (cols + 1)
		for i := range rows {
			u[(i+1)*s+j] = colIn[k][i]
		}
	}
	return nil
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
