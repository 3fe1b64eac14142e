package tests

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: neighbourhood collectives (MPI-3 §7.6) on Cartesian and
// distributed-graph communicators, every result checked against a
// sequential computation of what MPI defines, which the test makes from
// grid coordinates and edge lists of its own (not the library's).

func init() {
	rankCases["neighbor-cart"] = caseNeighborCart
	rankCases["neighbor-graph"] = caseNeighborGraph
}

// unset marks receive elements no message may write: the blocks of
// ProcNull neighbours and the gaps between v-form blocks.
const unset = -7

// nbGrid is a grid for the reference computation.
type nbGrid struct {
	dims    []int
	periods []bool
}

// neighbours returns rank r's -1 and +1 neighbour along dimension d (-1:
// none), computed from row-major coordinates.
func (g nbGrid) neighbours(r, d int) (minus, plus int) {
	coords := make([]int, len(g.dims))
	x := r
	for i := len(g.dims) - 1; i >= 0; i-- {
		coords[i] = x % g.dims[i]
		x /= g.dims[i]
	}
	at := func(delta int) int {
		c := slices.Clone(coords)
		c[d] += delta
		if c[d] < 0 || c[d] >= g.dims[d] {
			if !g.periods[d] {
				return -1
			}
			c[d] = (c[d] + g.dims[d]) % g.dims[d]
		}
		q := 0
		for i, n := range g.dims {
			q = q*n + c[i]
		}
		return q
	}
	return at(-1), at(1)
}

// nbVal is element j of the block a rank sends to its neighbour number
// (or, for the allgather forms, block 0).
func nbVal(rank, block, j int) int64 { return int64(rank*100000 + block*1000 + j) }

// nbGrids are the grids of n processes the Cartesian case runs: 1-D and
// 2-D (every factorisation, with 1 and 2 among the sizes) and 3-D, with
// every combination of periodic dimensions, and one grid smaller than n.
func nbGrids(n int) []nbGrid {
	var shapes [][]int
	shapes = append(shapes, []int{n}, []int{n - 1})
	for a := 1; a <= n; a++ {
		if n%a == 0 {
			shapes = append(shapes, []int{a, n / a})
		}
	}
	if n%2 == 0 {
		shapes = append(shapes, []int{2, 1, n / 2})
	}
	var gs []nbGrid
	for _, dims := range shapes {
		for mask := range 1 << len(dims) {
			p := make([]bool, len(dims))
			for i := range p {
				p[i] = mask&(1<<i) != 0
			}
			gs = append(gs, nbGrid{dims, p})
		}
	}
	return gs
}

// caseNeighborCart: NeighborAllgather, NeighborAlltoall and their v forms
// on every grid of nbGrids, with short and long (rendezvous) blocks.
func caseNeighborCart(w *mpi.Comm) error {
	for _, g := range nbGrids(w.Size()) {
		c, err := mpi.CartCreate(w, g.dims, g.periods, false)
		if err != nil {
			return fmt.Errorf("CartCreate %v %v: %w", g.dims, g.periods, err)
		}
		if c == nil {
			continue // outside a grid smaller than the world
		}
		for _, k := range []int{0, 3, 40000} {
			for _, mode := range []nbMode{nbBlocking, nbNonblocking, nbPersistent} {
				if err := checkNeighbor(c, g, k, mode); err != nil {
					return fmt.Errorf("grid %v periods %v, %d elements, %s: %w", g.dims, g.periods, k, mode, err)
				}
			}
		}
		if err := c.Free(); err != nil {
			return err
		}
	}
	return nil
}

// nbMode is how checkNeighbor calls the neighbourhood collectives.
type nbMode int

const (
	nbBlocking    nbMode = iota
	nbNonblocking        // Ineighbor_*, then Wait
	nbPersistent         // Neighbor_*_init, then Start and Wait twice, then Free
)

func (m nbMode) String() string { return [...]string{"blocking", "nonblocking", "persistent"}[m] }

// run makes one call in mode m: the blocking form, the nonblocking one
// or the persistent one. A persistent request runs twice (its buffers
// hold the same input, so the result must be the same), the receive
// buffer reset to unset before each run so that the second one shows.
func (m nbMode) run(recv []int64, blocking func() error, nonblocking, persistent func() (*mpi.Request, error)) error {
	switch m {
	case nbNonblocking:
		q, err := nonblocking()
		if err == nil {
			_, err = q.Wait()
		}
		return err
	case nbPersistent:
		q, err := persistent()
		if err != nil {
			return err
		}
		for run := range 2 {
			for i := range recv {
				recv[i] = unset
			}
			if err := q.Start(); err != nil {
				return fmt.Errorf("run %d: Start: %w", run, err)
			}
			if _, err := q.Wait(); err != nil {
				return fmt.Errorf("run %d: %w", run, err)
			}
		}
		return q.Free()
	}
	return blocking()
}

func checkNeighbor(c *mpi.Comm, g nbGrid, k int, mode nbMode) error {
	me := c.Rank()
	nd := len(g.dims)
	// srcs[i] is the rank whose block lands in block i; from[i] is the
	// block number it sent it as (its own neighbour index).
	srcs, from := make([]int, 2*nd), make([]int, 2*nd)
	for d := range nd {
		minus, plus := g.neighbours(me, d)
		srcs[2*d], from[2*d] = minus, 2*d+1 // it sent to its +1 neighbour
		srcs[2*d+1], from[2*d+1] = plus, 2*d
	}
	check := func(what string, got []int64, off func(i int) int, count func(i int) int, val func(i, j int) int64) error {
		written := make([]bool, len(got))
		for i := range 2 * nd {
			if srcs[i] < 0 {
				continue
			}
			for j := range count(i) {
				p := off(i) + j
				written[p] = true
				if want := val(i, j); got[p] != want {
					return fmt.Errorf("%s: rank %d block %d element %d is %d, want %d (from rank %d)", what, me, i, j, got[p], want, srcs[i])
				}
			}
		}
		for p, v := range got {
			if !written[p] && v != unset {
				return fmt.Errorf("%s: rank %d element %d, which no neighbour sends, was overwritten with %d", what, me, p, v)
			}
		}
		return nil
	}
	fill := func(n int) []int64 {
		b := make([]int64, n)
		for i := range b {
			b[i] = unset
		}
		return b
	}

	// Allgather: the same k elements to every neighbour.
	send := make([]int64, k)
	for j := range send {
		send[j] = nbVal(me, 0, j)
	}
	recv := fill(2 * nd * k)
	if err := mode.run(recv, func() error { return mpi.NeighborAllgather(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.IneighborAllgather(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.NeighborAllgatherInit(c, send, recv) }); err != nil {
		return err
	}
	if err := check("NeighborAllgather", recv, func(i int) int { return i * k }, func(int) int { return k },
		func(i, j int) int64 { return nbVal(srcs[i], 0, j) }); err != nil {
		return err
	}

	// Alltoall: block i to neighbour i.
	send = make([]int64, 2*nd*k)
	for i := range 2 * nd {
		for j := range k {
			send[i*k+j] = nbVal(me, i, j)
		}
	}
	recv = fill(2 * nd * k)
	if err := mode.run(recv, func() error { return mpi.NeighborAlltoall(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.IneighborAlltoall(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.NeighborAlltoallInit(c, send, recv) }); err != nil {
		return err
	}
	if err := check("NeighborAlltoall", recv, func(i int) int { return i * k }, func(int) int { return k },
		func(i, j int) int64 { return nbVal(srcs[i], from[i], j) }); err != nil {
		return err
	}

	// The v forms: sizes that differ by rank and block, blocks placed
	// backwards with a gap of one element after each.
	vcount := func(rank, block int) int { return k/(1+(rank+block)%3) + (rank+block)%2 }
	layout := func(count func(i int) int) (counts, displs []int, total int) {
		counts, displs = make([]int, 2*nd), make([]int, 2*nd)
		for i := 2*nd - 1; i >= 0; i-- {
			counts[i], displs[i] = count(i), total
			total += counts[i] + 1
		}
		return counts, displs, total
	}
	rcount := func(i int) int {
		if srcs[i] < 0 {
			return 2 // ignored: nothing comes from ProcNull
		}
		return vcount(srcs[i], 0)
	}
	rc, rd, total := layout(rcount)
	send = make([]int64, vcount(me, 0))
	for j := range send {
		send[j] = nbVal(me, 0, j)
	}
	recv = fill(total)
	if err := mode.run(recv, func() error { return mpi.NeighborAllgatherv(c, send, recv, rc, rd) },
		func() (*mpi.Request, error) { return mpi.IneighborAllgatherv(c, send, recv, rc, rd) },
		func() (*mpi.Request, error) { return mpi.NeighborAllgathervInit(c, send, recv, rc, rd) }); err != nil {
		return err
	}
	if err := check("NeighborAllgatherv", recv, func(i int) int { return rd[i] }, rcount,
		func(i, j int) int64 { return nbVal(srcs[i], 0, j) }); err != nil {
		return err
	}

	sc, sd, stotal := layout(func(i int) int { return vcount(me, i) })
	send = make([]int64, stotal)
	for i := range 2 * nd {
		for j := range sc[i] {
			send[sd[i]+j] = nbVal(me, i, j)
		}
	}
	rcount = func(i int) int {
		if srcs[i] < 0 {
			return 1
		}
		return vcount(srcs[i], from[i])
	}
	rc, rd, total = layout(rcount)
	recv = fill(total)
	if err := mode.run(recv, func() error { return mpi.NeighborAlltoallv(c, send, sc, sd, recv, rc, rd) },
		func() (*mpi.Request, error) { return mpi.IneighborAlltoallv(c, send, sc, sd, recv, rc, rd) },
		func() (*mpi.Request, error) { return mpi.NeighborAlltoallvInit(c, send, sc, sd, recv, rc, rd) }); err != nil {
		return err
	}
	return check("NeighborAlltoallv", recv, func(i int) int { return rd[i] }, rcount,
		func(i, j int) int64 { return nbVal(srcs[i], from[i], j) })
}

// TestNeighborCart runs caseNeighborCart at np 4 and 6.
func TestNeighborCart(t *testing.T) {
	for _, np := range []int{4, 6} {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) { job{np: np, cas: "neighbor-cart"}.ok(t) })
	}
}

// nbDests is rank r's destinations in the graph of caseNeighborCart: a
// repeated edge, a self edge, and edges that are not symmetric.
func nbDests(r, n int) []int {
	switch r % 3 {
	case 0:
		return []int{(r + 1) % n, (r + 1) % n, r, (r + 3) % n}
	case 1:
		return []int{(r + 2) % n}
	}
	return nil
}

// caseNeighborGraph: DistGraphCreateAdjacent on a graph with repeated,
// self and one-way edges (sources listed in an order of their own), its
// neighbour lists, NeighborAlltoall and NeighborAllgather checked against
// the edge lists; then the errors: a graph whose ends disagree, a rank
// out of range, a neighbourhood call on a communicator without topology,
// and a call with one rank's buffer too short, after which the
// communicator still works.
func caseNeighborGraph(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	dests := nbDests(me, n)
	// Sources: every rank s that lists me, once per listing, highest s
	// first. srcBlock[i] is the destination index s sent the block as.
	var sources, srcBlock []int
	for s := n - 1; s >= 0; s-- {
		for j, d := range nbDests(s, n) {
			if d == me {
				sources = append(sources, s)
				srcBlock = append(srcBlock, j)
			}
		}
	}
	dw := make([]int, len(dests))
	for i := range dw {
		dw[i] = 10 + i
	}
	g, err := mpi.DistGraphCreateAdjacent(w, sources, nil, dests, dw, false)
	if err != nil {
		return err
	}
	if !g.IsDistGraph() || g.IsCartesian() {
		return fmt.Errorf("DistGraphCreateAdjacent: topology not recorded")
	}
	gs, gsw, gd, gdw, err := g.DistGraphNeighbors()
	if err != nil || !slices.Equal(gs, sources) || gsw != nil || !slices.Equal(gd, dests) || !slices.Equal(gdw, dw) {
		return fmt.Errorf("DistGraphNeighbors: %v %v %v %v %v", gs, gsw, gd, gdw, err)
	}
	for _, k := range []int{1, 5000} {
		send := make([]int64, len(dests)*k)
		for i := range dests {
			for j := range k {
				send[i*k+j] = nbVal(me, i, j)
			}
		}
		// One element past the blocks must stay as it was (not at a rank
		// without destinations: its block size comes from len(recv)).
		extra := min(len(dests), 1)
		recv := make([]int64, len(sources)*k+extra)
		if extra > 0 {
			recv[len(recv)-1] = unset
		}
		if err := mpi.NeighborAlltoall(g, send, recv); err != nil {
			return err
		}
		for i, s := range sources {
			for j := range k {
				if want := nbVal(s, srcBlock[i], j); recv[i*k+j] != want {
					return fmt.Errorf("graph NeighborAlltoall: block %d element %d is %d, want %d (rank %d's block %d)", i, j, recv[i*k+j], want, s, srcBlock[i])
				}
			}
		}
		if extra > 0 && recv[len(recv)-1] != unset {
			return fmt.Errorf("graph NeighborAlltoall wrote past its blocks")
		}
		// The nonblocking and persistent forms give what the blocking one did.
		for _, mode := range []nbMode{nbNonblocking, nbPersistent} {
			got := make([]int64, len(recv))
			if err := mode.run(got, nil, func() (*mpi.Request, error) { return mpi.IneighborAlltoall(g, send, got) },
				func() (*mpi.Request, error) { return mpi.NeighborAlltoallInit(g, send, got) }); err != nil {
				return fmt.Errorf("graph NeighborAlltoall %s: %w", mode, err)
			}
			if extra > 0 {
				got[len(got)-1] = unset // the blocking call's check above covers it
			}
			if !slices.Equal(got, recv) {
				return fmt.Errorf("graph NeighborAlltoall %s: %v, the blocking call gave %v", mode, got, recv)
			}
		}
		recv = make([]int64, len(sources)*k)
		if err := mpi.NeighborAllgather(g, send[:0:0], recv[:0]); err != nil {
			return err
		}
		mine := []int64{int64(me), int64(me * k)}
		recv = make([]int64, 2*len(sources))
		if err := mpi.NeighborAllgather(g, mine, recv); err != nil {
			return err
		}
		for i, s := range sources {
			if recv[2*i] != int64(s) || recv[2*i+1] != int64(s*k) {
				return fmt.Errorf("graph NeighborAllgather: block %d is %v, want rank %d's", i, recv[2*i:2*i+2], s)
			}
		}
	}

	// A graph whose ends disagree: rank 0 drops one of its sources.
	bad := slices.Clone(sources)
	if me == 0 && len(bad) > 0 {
		bad = bad[1:]
	}
	if _, err := mpi.DistGraphCreateAdjacent(w, bad, nil, dests, nil, false); !errors.Is(err, mpi.ErrTopology) {
		return fmt.Errorf("inconsistent graph: %v, want ErrTopology", err)
	}
	// A rank out of range at rank 1: ErrRank there, ErrTopology elsewhere.
	out := dests
	if me == 1 {
		out = append(slices.Clone(dests), n)
	}
	_, err = mpi.DistGraphCreateAdjacent(w, sources, nil, out, nil, false)
	if want := map[bool]error{true: mpi.ErrRank, false: mpi.ErrTopology}[me == 1]; !errors.Is(err, want) {
		return fmt.Errorf("neighbour %d: %v, want %v", n, err, want)
	}
	if err := mpi.NeighborAllgather(w, []int64{1}, make([]int64, 8)); !errors.Is(err, mpi.ErrTopology) {
		return fmt.Errorf("NeighborAllgather without topology: %v, want ErrTopology", err)
	}
	// Buffers that overlap (at a rank without sources the receive buffer
	// is empty and overlaps nothing; the call fails there or not,
	// depending on whether it waits for a rank that failed).
	buf := make([]int64, 4*len(sources)+4)
	err = mpi.NeighborAllgather(g, buf[:2], buf[1:])
	if len(sources) > 0 && !errors.Is(err, mpi.ErrBuffer) {
		return fmt.Errorf("overlapping buffers: %v, want ErrBuffer", err)
	}

	// A ring (periodic 1-D grid), where rank 0's receive buffer is too
	// short: ErrCount at rank 0, an error (not a wait) at its neighbours,
	// and the next call works everywhere.
	ring, err := mpi.CartCreate(w, []int{n}, []bool{true}, false)
	if err != nil {
		return err
	}
	short := 4
	if me == 0 {
		short = 3
	}
	err = mpi.NeighborAllgather(ring, []int64{1, 2}, make([]int64, short))
	switch {
	case me == 0 && !errors.Is(err, mpi.ErrCount):
		return fmt.Errorf("short buffer: %v, want ErrCount", err)
	case (me == 1 || me == n-1) && err == nil:
		return fmt.Errorf("rank %d: NeighborAllgather succeeded although its neighbour 0 failed", me)
	}
	recv := make([]int64, 2)
	if err := mpi.NeighborAllgather(ring, []int64{int64(me)}, recv); err != nil {
		return fmt.Errorf("after a failed call: %w", err)
	}
	if recv[0] != int64((me+n-1)%n) || recv[1] != int64((me+1)%n) {
		return fmt.Errorf("ring NeighborAllgather after a failed call: %v", recv)
	}
	return nil
}

// TestNeighborGraph runs caseNeighborGraph at np 4 and 6.
func TestNeighborGraph(t *testing.T) {
	for _, np := range []int{4, 6} {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) { job{np: np, cas: "neighbor-graph"}.ok(t) })
	}
}

func init() { rankCases["neighbor-ref"] = caseNeighborRef }

// caseNeighborRef is tests/openmpi/neighbor.c in Go: the four
// neighbourhood collectives on 1-D and 2-D grids of every periodicity and
// on nbDests's graph, every rank's receive buffers printed at rank 0 in
// the C program's format.
func caseNeighborRef(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	if n%2 != 0 {
		return fmt.Errorf("neighbor-ref needs an even number of ranks, not %d", n)
	}
	out := func(what string, buf []int32) error {
		line := fmt.Sprintf("%s rank %d:", what, me)
		for _, v := range buf {
			line += fmt.Sprintf(" %d", v)
		}
		all, err := mpi.GatherObj(w, line, 0)
		if err != nil {
			return err
		}
		if me == 0 {
			for _, l := range all {
				fmt.Println(l)
			}
		}
		return nil
	}
	vcount := func(r, b int) int { return 1 + (r+b)%3 }
	unsetBuf := func() []int32 {
		b := make([]int32, 256)
		for i := range b {
			b[i] = unset
		}
		return b
	}
	// run is the C program's run(): src[i] < 0 is ProcNull, from[i] the
	// index under which source i sends its block.
	run := func(c *mpi.Comm, label string, src, from []int, outdeg int) error {
		indeg := len(src)
		send := []int32{int32(me * 10), int32(me*10 + 1)}
		recv := unsetBuf()
		if err := mpi.NeighborAllgather(c, send, recv[:2*indeg]); err != nil {
			return err
		}
		if err := out(label+" allgather", recv[:2*indeg]); err != nil {
			return err
		}
		send = make([]int32, 2*outdeg)
		for i := range outdeg {
			for j := range 2 {
				send[2*i+j] = int32(me*100 + i*10 + j)
			}
		}
		recv = unsetBuf()
		if err := mpi.NeighborAlltoall(c, send, recv[:2*indeg]); err != nil {
			return err
		}
		if err := out(label+" alltoall", recv[:2*indeg]); err != nil {
			return err
		}
		backwards := func(k int, count func(i int) int) (counts, displs []int, total int) {
			counts, displs = make([]int, k), make([]int, k)
			for i := k - 1; i >= 0; i-- {
				counts[i], displs[i] = count(i), total
				total += counts[i] + 1
			}
			return counts, displs, total
		}
		rc, rd, total := backwards(indeg, func(i int) int {
			if src[i] < 0 {
				return 2
			}
			return vcount(src[i], 0)
		})
		send = make([]int32, vcount(me, 0))
		for j := range send {
			send[j] = int32(me*10 + j)
		}
		recv = unsetBuf()
		if err := mpi.NeighborAllgatherv(c, send, recv[:total], rc, rd); err != nil {
			return err
		}
		if err := out(label+" allgatherv", recv[:total]); err != nil {
			return err
		}
		sc, sd, stotal := backwards(outdeg, func(i int) int { return vcount(me, i) })
		send = make([]int32, stotal)
		for i := range outdeg {
			for j := range sc[i] {
				send[sd[i]+j] = int32(me*100 + i*10 + j)
			}
		}
		rc, rd, total = backwards(indeg, func(i int) int {
			if src[i] < 0 {
				return 1
			}
			return vcount(src[i], from[i])
		})
		recv = unsetBuf()
		if err := mpi.NeighborAlltoallv(c, send, sc, sd, recv[:total], rc, rd); err != nil {
			return err
		}
		return out(label+" alltoallv", recv[:total])
	}
	for _, shape := range [][]int{{n}, {2, n / 2}, {n / 2, 2}, {1, n}} {
		for mask := range 1 << len(shape) {
			periods := make([]bool, len(shape))
			label := fmt.Sprintf("cart %d p", shape[0])
			if len(shape) == 2 {
				label = fmt.Sprintf("cart %dx%d p", shape[0], shape[1])
			}
			for i := range periods {
				periods[i] = mask&(1<<i) != 0
				label += fmt.Sprint(b2i[int](periods[i]))
			}
			c, err := mpi.CartCreate(w, shape, periods, false)
			if err != nil {
				return err
			}
			g := nbGrid{shape, periods}
			var src, from []int
			for d := range shape {
				minus, plus := g.neighbours(me, d)
				src = append(src, minus, plus)
				from = append(from, 2*d+1, 2*d)
			}
			if err := run(c, label, src, from, len(src)); err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			if err := c.Free(); err != nil {
				return err
			}
		}
	}
	var src, from []int
	for s := n - 1; s >= 0; s-- {
		for j, d := range nbDests(s, n) {
			if d == me {
				src, from = append(src, s), append(from, j)
			}
		}
	}
	dests := nbDests(me, n)
	g, err := mpi.DistGraphCreateAdjacent(w, src, nil, dests, nil, false)
	if err != nil {
		return err
	}
	if err := run(g, "graph", src, from, len(dests)); err != nil {
		return fmt.Errorf("graph: %w", err)
	}
	if me == 0 {
		fmt.Println("done")
	}
	return g.Free()
}

// TestNeighborAgainstOpenMPI: caseNeighborRef prints, at np 4 and 6, the
// lines tests/openmpi/neighbor.c prints under Open MPI (integers, so
// exactly).
func TestNeighborAgainstOpenMPI(t *testing.T) {
	for _, np := range []int{4, 6} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			got := job{np: np, cas: "neighbor-ref"}.ok(t).stdout
			want := mpirun(t, np, filepath.Join(openmpi(t), "neighbor"))
			if got != want {
				t.Fatalf("gorun:\n%s\nOpen MPI:\n%s", got, want)
			}
		})
	}
}
