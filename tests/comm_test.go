package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() {
	rankCases["comm"] = caseComm
	rankCases["cart"] = caseCart
}

// caseComm: Dup, Split, SplitType, Create, Compare and groups; traffic of
// different communicators with the same tags and ranks never mixes.
func caseComm(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	d, err := w.Dup()
	if err != nil {
		return err
	}
	if d.Size() != n || d.Rank() != me {
		return fmt.Errorf("Dup: rank %d of %d", d.Rank(), d.Size())
	}
	if c, _ := mpi.CommCompare(w, d); c != mpi.Congruent && n > 0 {
		return fmt.Errorf("CommCompare(world, dup) = %v", c)
	}
	if c, _ := mpi.CommCompare(w, w); c != mpi.Ident {
		return fmt.Errorf("CommCompare(world, world) = %v", c)
	}
	// The same (source, tag) on world and dup: each receive gets its own
	// communicator's message, whatever the posting order.
	if n >= 2 {
		peer := (me + 1) % n
		from := (me - 1 + n) % n
		if err := mpi.Send(w, []int{100 + me}, peer, 3); err != nil {
			return err
		}
		if err := mpi.Send(d, []int{200 + me}, peer, 3); err != nil {
			return err
		}
		x := []int{0}
		if _, err := mpi.Recv(d, x, from, 3); err != nil || x[0] != 200+from {
			return fmt.Errorf("dup received %v %v", x, err)
		}
		if _, err := mpi.Recv(w, x, from, 3); err != nil || x[0] != 100+from {
			return fmt.Errorf("world received %v %v", x, err)
		}
	}
	// Collectives on world and dup interleaved through nonblocking calls.
	a, b := []int{me}, []int{2 * me}
	qa, err := mpi.Iallreduce(w, a, a, mpi.Sum)
	if err != nil {
		return err
	}
	qb, err := mpi.Iallreduce(d, b, b, mpi.Sum)
	if err != nil {
		return err
	}
	if _, err := mpi.Waitall([]*mpi.Request{qb, qa}); err != nil {
		return err
	}
	if a[0] != n*(n-1)/2 || b[0] != n*(n-1) {
		return fmt.Errorf("interleaved allreduces: %d %d", a[0], b[0])
	}

	// Split by parity, keys reversing the order.
	s, err := w.Split(me%2, -me)
	if err != nil {
		return err
	}
	var mates []int
	for r := n - 1; r >= 0; r-- {
		if r%2 == me%2 {
			mates = append(mates, r)
		}
	}
	if s.Size() != len(mates) || s.Rank() != slices.Index(mates, me) {
		return fmt.Errorf("Split: rank %d of %d, want %d of %d", s.Rank(), s.Size(), slices.Index(mates, me), len(mates))
	}
	all := make([]int, s.Size())
	if err := mpi.Allgather(s, []int{me}, all); err != nil {
		return err
	}
	if !slices.Equal(all, mates) {
		return fmt.Errorf("Split members %v, want %v", all, mates)
	}
	// Undefined color.
	color := 0
	if me == 0 {
		color = mpi.Undefined
	}
	u, err := w.Split(color, 0)
	if err != nil {
		return err
	}
	if (me == 0) != (u == nil) {
		return fmt.Errorf("Split with Undefined: %v", u)
	}
	if u != nil {
		x := []int{1}
		if err := mpi.Allreduce(u, x, x, mpi.Sum); err != nil || x[0] != n-1 {
			return fmt.Errorf("allreduce on the split without rank 0: %v %v", x, err)
		}
		if err := u.Free(); err != nil {
			return err
		}
	}
	// SplitType: every rank here shares one host.
	h, err := w.SplitType(mpi.SplitShared, 0)
	if err != nil {
		return err
	}
	if c, _ := mpi.CommCompare(h, w); h.Size() != n || c != mpi.Congruent {
		return fmt.Errorf("SplitType(shared): size %d, compare %v", h.Size(), c)
	}

	// Groups.
	g, err := w.Group()
	if err != nil {
		return err
	}
	if g.Size() != n || g.Rank() != me {
		return fmt.Errorf("group: rank %d of %d", g.Rank(), g.Size())
	}
	var evens, odds, rev []int
	for r := range n {
		if r%2 == 0 {
			evens = append(evens, r)
		} else {
			odds = append(odds, r)
		}
		rev = append(rev, n-1-r)
	}
	ge, err := g.Incl(evens)
	if err != nil {
		return err
	}
	go_, err := g.Excl(evens)
	if err != nil {
		return err
	}
	if go_.Size() != len(odds) {
		return fmt.Errorf("Excl: size %d", go_.Size())
	}
	un, _ := mpi.GroupUnion(ge, go_)
	in, _ := mpi.GroupIntersection(ge, go_)
	df, _ := mpi.GroupDifference(g, ge)
	if un.Size() != n || in.Size() != 0 || df.Size() != len(odds) {
		return fmt.Errorf("union %d, intersection %d, difference %d", un.Size(), in.Size(), df.Size())
	}
	if c, _ := mpi.GroupCompare(un, g); n > 2 && c != mpi.Similar {
		return fmt.Errorf("GroupCompare(union, world) = %v", c)
	}
	if c, _ := mpi.GroupCompare(g, g); c != mpi.Ident {
		return fmt.Errorf("GroupCompare(g, g) = %v", c)
	}
	gr, _ := g.Incl(rev)
	tr, err := mpi.GroupTranslateRanks(g, []int{0, n - 1}, gr)
	if err != nil || tr[0] != n-1 || tr[1] != 0 {
		return fmt.Errorf("TranslateRanks: %v %v", tr, err)
	}
	tr, _ = mpi.GroupTranslateRanks(g, []int{me}, ge)
	if (me%2 == 0) != (tr[0] != mpi.Undefined) {
		return fmt.Errorf("TranslateRanks into evens: %v", tr)
	}
	if _, err := g.Incl([]int{0, 0}); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("Incl with a duplicate: %v", err)
	}
	if _, err := g.Incl([]int{n}); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("Incl out of range: %v", err)
	}
	// Create from the reversed group: ranks reversed.
	cr, err := w.Create(gr)
	if err != nil {
		return err
	}
	if cr.Rank() != n-1-me {
		return fmt.Errorf("Create(reversed): rank %d", cr.Rank())
	}
	if c, _ := mpi.CommCompare(cr, w); n > 1 && c != mpi.Similar {
		return fmt.Errorf("CommCompare(reversed, world) = %v", c)
	}
	ce, err := w.Create(ge)
	if err != nil {
		return err
	}
	if (me%2 == 0) != (ce != nil) {
		return fmt.Errorf("Create(evens) at rank %d: %v", me, ce)
	}
	if ce != nil {
		x := make([]int, ce.Size())
		if err := mpi.Allgather(ce, []int{me}, x); err != nil || !slices.Equal(x, evens) {
			return fmt.Errorf("allgather on evens: %v %v", x, err)
		}
	}
	// Many communicators at once keep their traffic apart: a chain of
	// dups, each running a Bcast from a different root.
	comms := []*mpi.Comm{w, d, s, h, cr}
	for i := 0; i < 5; i++ {
		c, err := comms[len(comms)-1].Dup()
		if err != nil {
			return err
		}
		comms = append(comms, c)
	}
	var reqs []*mpi.Request
	bufs := make([][]int, len(comms))
	for i, c := range comms {
		bufs[i] = make([]int, 3)
		root := i % c.Size()
		if c.Rank() == root {
			bufs[i] = []int{i, i * 2, i * 3}
		}
		q, err := mpi.Ibcast(c, bufs[i], root)
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	for i, b := range bufs {
		if b[0] != i || b[2] != 3*i {
			return fmt.Errorf("bcast on communicator %d: %v", i, b)
		}
	}
	for _, c := range comms[1:] {
		if err := c.Free(); err != nil {
			return err
		}
	}
	return mpi.Barrier(w)
}

// caseCart: DimsCreate, CartCreate (periodic and not), coordinates, ranks,
// shifts and sub-grids.
func caseCart(w *mpi.Comm) error {
	n, me := w.Size(), w.Rank()
	dims, err := mpi.DimsCreate(n, []int{0, 0})
	if err != nil {
		return err
	}
	c, err := mpi.CartCreate(w, dims, []bool{true, false}, false)
	if err != nil {
		return err
	}
	if c.Rank() != me || !c.IsCartesian() {
		return fmt.Errorf("CartCreate without reorder: rank %d", c.Rank())
	}
	gd, gp, coords, err := c.CartGet()
	if err != nil || !slices.Equal(gd, dims) || !gp[0] || gp[1] {
		return fmt.Errorf("CartGet: %v %v %v %v", gd, gp, coords, err)
	}
	if coords[0] != me/dims[1] || coords[1] != me%dims[1] {
		return fmt.Errorf("coordinates %v of rank %d in %v", coords, me, dims)
	}
	for r := range n {
		cc, err := c.CartCoords(r)
		if err != nil {
			return err
		}
		if back, err := c.CartRank(cc); err != nil || back != r {
			return fmt.Errorf("CartRank(CartCoords(%d)) = %d %v", r, back, err)
		}
	}
	// Periodic dimension 0 wraps; dimension 1 does not.
	src, dst, err := c.CartShift(0, 1)
	if err != nil {
		return err
	}
	up, _ := c.CartRank([]int{coords[0] - 1, coords[1]})
	down, _ := c.CartRank([]int{coords[0] + 1, coords[1]})
	if src != up || dst != down {
		return fmt.Errorf("shift along 0: %d %d, want %d %d", src, dst, up, down)
	}
	src, dst, _ = c.CartShift(1, 1)
	if (coords[1] == 0) != (src == mpi.ProcNull) || (coords[1] == dims[1]-1) != (dst == mpi.ProcNull) {
		return fmt.Errorf("shift along 1 at %v: %d %d", coords, src, dst)
	}
	if _, err := c.CartRank([]int{0, dims[1]}); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("CartRank past a non-periodic edge: %v", err)
	}
	// Rows: keep dimension 1.
	row, err := c.CartSub([]bool{false, true})
	if err != nil {
		return err
	}
	if row.Size() != dims[1] || row.Rank() != coords[1] {
		return fmt.Errorf("row: rank %d of %d", row.Rank(), row.Size())
	}
	sum := []int{me}
	if err := mpi.Allreduce(row, sum, sum, mpi.Sum); err != nil {
		return err
	}
	want := 0
	for j := range dims[1] {
		want += coords[0]*dims[1] + j
	}
	if sum[0] != want {
		return fmt.Errorf("row sum %d, want %d", sum[0], want)
	}
	// A grid smaller than the communicator leaves the rest out.
	if n > 1 {
		g, err := mpi.CartCreate(w, []int{n - 1}, []bool{false}, true)
		if err != nil {
			return err
		}
		if (g == nil) != (me == n-1) {
			return fmt.Errorf("CartCreate of %d at rank %d: %v", n-1, me, g)
		}
	}
	return mpi.Barrier(w)
}

func TestComm(t *testing.T) {
	for _, np := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "comm"}.ok(t)
		})
	}
}

func TestCart(t *testing.T) {
	for _, np := range []int{1, 4, 6} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			job{np: np, cas: "cart"}.ok(t)
		})
	}
}
