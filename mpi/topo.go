package mpi

import (
	"slices"
	"sort"
)

// cartTopo is a Cartesian communicator's grid. Ranks are laid out in row
// major order: the last dimension varies fastest, as in MPI.
type cartTopo struct {
	dims    []int
	periods []bool
	coords  []int // this rank's
}

func (t *cartTopo) clone() *cartTopo {
	return &cartTopo{dims: slices.Clone(t.dims), periods: slices.Clone(t.periods), coords: slices.Clone(t.coords)}
}

// coordsOf is rank r's coordinates.
func (t *cartTopo) coordsOf(r int) []int {
	c := make([]int, len(t.dims))
	for i := len(t.dims) - 1; i >= 0; i-- {
		c[i] = r % t.dims[i]
		r /= t.dims[i]
	}
	return c
}

// rankOf is the rank at coordinates c (already in range).
func (t *cartTopo) rankOf(c []int) int {
	r := 0
	for i, d := range t.dims {
		r = r*d + c[i]
	}
	return r
}

func product(v []int) int {
	p := 1
	for _, x := range v {
		p *= x
	}
	return p
}

// DimsCreate returns a balanced grid of nnodes processes in len(dims)
// dimensions (MPI_Dims_create): entries of dims that are positive are
// kept, zeros are filled so that the product is nnodes, the filled ones as
// close to each other as possible and in non-increasing order.
func DimsCreate(nnodes int, dims []int) ([]int, error) {
	const op = "DimsCreate"
	if nnodes < 1 {
		return nil, errorf(ErrArg, op, "%d processes", nnodes)
	}
	out := slices.Clone(dims)
	fixed, free := 1, 0
	for _, d := range out {
		switch {
		case d < 0:
			return nil, errorf(ErrArg, op, "negative dimension %d", d)
		case d == 0:
			free++
		default:
			fixed *= d
		}
	}
	if nnodes%fixed != 0 {
		return nil, errorf(ErrArg, op, "%d processes do not divide into the fixed dimensions (product %d)", nnodes, fixed)
	}
	if free == 0 {
		if fixed != nnodes {
			return nil, errorf(ErrArg, op, "dimensions multiply to %d, not %d", fixed, nnodes)
		}
		return out, nil
	}
	// Prime factors, largest first, each to the currently smallest free
	// dimension.
	rest := nnodes / fixed
	var primes []int
	for p := 2; p*p <= rest; p++ {
		for rest%p == 0 {
			primes = append(primes, p)
			rest /= p
		}
	}
	if rest > 1 {
		primes = append(primes, rest)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(primes)))
	f := make([]int, free)
	for i := range f {
		f[i] = 1
	}
	for _, p := range primes {
		k := 0
		for i := range f {
			if f[i] < f[k] {
				k = i
			}
		}
		f[k] *= p
	}
	sort.Sort(sort.Reverse(sort.IntSlice(f)))
	k := 0
	for i, d := range out {
		if d == 0 {
			out[i] = f[k]
			k++
		}
	}
	return out, nil
}

// CartCreate returns a communicator whose ranks form a grid of the given
// dimensions, periodic (wrapping around) where periods says so
// (MPI_Cart_create). The grid takes the first product(dims) processes of
// c; the others get nil. With reorder the ranks are ordered by node
// first, so that grid neighbours along the last dimension tend to share a
// host; without it they keep c's order. Collective over c.
func CartCreate(c *Comm, dims []int, periods []bool, reorder bool) (_ *Comm, err error) {
	defer c.failTo(&err)
	const op = "CartCreate"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if len(dims) == 0 || len(periods) != len(dims) {
		return nil, errorf(ErrArg, op, "%d dimensions and %d periods", len(dims), len(periods))
	}
	for _, d := range dims {
		if d < 1 {
			return nil, errorf(ErrArg, op, "dimension %d", d)
		}
	}
	n := product(dims)
	if n > c.Size() {
		return nil, errorf(ErrArg, op, "a grid of %d for %d processes", n, c.Size())
	}
	ctx, err := c.agreeCtx(op)
	if err != nil {
		return nil, err
	}
	order := make([]int, c.Size()) // grid rank -> rank in c
	for i := range order {
		order[i] = i
	}
	if reorder {
		node := c.cc.Node
		hosts := hostsOf(c.rt, c.world)
		if hosts != nil {
			node = make([]int, len(hosts))
			for i, h := range hosts {
				node[i] = slices.Index(hosts, h)
			}
		}
		sort.SliceStable(order, func(i, j int) bool { return node[order[i]] < node[order[j]] })
	}
	order = order[:n]
	me := slices.Index(order, c.rank)
	if me < 0 {
		ctxs.release(ctx)
		return nil, nil
	}
	world := make([]int, n)
	for i, r := range order {
		world[i] = c.world[r]
	}
	g := newComm(c.name+" cart", c.rt, ctx, world, me)
	g.inherit(c)
	g.cart = &cartTopo{dims: slices.Clone(dims), periods: slices.Clone(periods)}
	g.cart.coords = g.cart.coordsOf(me)
	return g, nil
}

func (c *Comm) cartCheck(op string) error {
	if err := c.check(op); err != nil {
		return err
	}
	if c.cart == nil {
		return errorf(ErrArg, op, "%s has no Cartesian topology", c.name)
	}
	return nil
}

// IsCartesian reports whether c has a Cartesian topology (MPI_Topo_test).
func (c *Comm) IsCartesian() bool { return c != nil && c.cart != nil }

// CartGet returns c's grid: its dimensions, periodicity and this rank's
// coordinates (MPI_Cart_get).
func (c *Comm) CartGet() (dims []int, periods []bool, coords []int, err error) {
	defer c.failTo(&err)
	if err := c.cartCheck("CartGet"); err != nil {
		return nil, nil, nil, err
	}
	t := c.cart
	return slices.Clone(t.dims), slices.Clone(t.periods), slices.Clone(t.coords), nil
}

// CartCoords returns the coordinates of rank in c's grid (MPI_Cart_coords).
func (c *Comm) CartCoords(rank int) (_ []int, err error) {
	defer c.failTo(&err)
	if err := c.cartCheck("CartCoords"); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= c.Size() {
		return nil, errorf(ErrRank, "CartCoords", "rank %d is not in %s (size %d)", rank, c.name, c.Size())
	}
	return c.cart.coordsOf(rank), nil
}

// CartRank returns the rank at coordinates coords (MPI_Cart_rank);
// coordinates of a periodic dimension wrap around, those of another must
// be in range.
func (c *Comm) CartRank(coords []int) (_ int, err error) {
	defer c.failTo(&err)
	const op = "CartRank"
	if err := c.cartCheck(op); err != nil {
		return 0, err
	}
	t := c.cart
	if len(coords) != len(t.dims) {
		return 0, errorf(ErrArg, op, "%d coordinates for %d dimensions", len(coords), len(t.dims))
	}
	w := make([]int, len(coords))
	for i, x := range coords {
		switch {
		case t.periods[i]:
			w[i] = ((x % t.dims[i]) + t.dims[i]) % t.dims[i]
		case x < 0 || x >= t.dims[i]:
			return 0, errorf(ErrRank, op, "coordinate %d is outside dimension %d of size %d", x, i, t.dims[i])
		default:
			w[i] = x
		}
	}
	return t.rankOf(w), nil
}

// CartShift returns the ranks disp steps behind (source) and ahead (dest)
// of this rank along dimension dim (MPI_Cart_shift): the neighbours to
// receive from and send to in a shift. Past the edge of a non-periodic
// dimension the answer is ProcNull.
func (c *Comm) CartShift(dim, disp int) (source, dest int, err error) {
	defer c.failTo(&err)
	const op = "CartShift"
	if err := c.cartCheck(op); err != nil {
		return 0, 0, err
	}
	t := c.cart
	if dim < 0 || dim >= len(t.dims) {
		return 0, 0, errorf(ErrArg, op, "dimension %d of %d", dim, len(t.dims))
	}
	src, dst := t.shift(dim, disp)
	return src, dst, nil
}

// shift is CartShift for this rank of t: the ranks disp steps behind and
// ahead along dimension dim, ProcNull past a non-periodic edge.
func (t *cartTopo) shift(dim, disp int) (source, dest int) {
	at := func(delta int) int {
		x := slices.Clone(t.coords)
		x[dim] += delta
		if t.periods[dim] {
			x[dim] = ((x[dim] % t.dims[dim]) + t.dims[dim]) % t.dims[dim]
		} else if x[dim] < 0 || x[dim] >= t.dims[dim] {
			return ProcNull
		}
		return t.rankOf(x)
	}
	return at(-disp), at(disp)
}

// CartSub splits c's grid into sub-grids that keep the dimensions where
// remain is true (MPI_Cart_sub): the processes that share their
// coordinates in the dropped dimensions form a sub-grid together. With no
// dimension kept each process gets a grid of itself. Collective over c.
func (c *Comm) CartSub(remain []bool) (_ *Comm, err error) {
	defer c.failTo(&err)
	const op = "CartSub"
	if err := c.cartCheck(op); err != nil {
		return nil, err
	}
	t := c.cart
	if len(remain) != len(t.dims) {
		return nil, errorf(ErrArg, op, "%d flags for %d dimensions", len(remain), len(t.dims))
	}
	color, key := 0, 0
	var dims []int
	var periods []bool
	for i, d := range t.dims {
		if remain[i] {
			key = key*d + t.coords[i]
			dims = append(dims, d)
			periods = append(periods, t.periods[i])
		} else {
			color = color*d + t.coords[i]
		}
	}
	s, err := c.split(op, color, key, nil)
	if err != nil {
		return nil, err
	}
	if len(dims) == 0 {
		dims, periods = []int{1}, []bool{false}
	}
	s.name = c.name + " sub"
	s.cart = &cartTopo{dims: dims, periods: periods}
	s.cart.coords = s.cart.coordsOf(s.rank)
	return s, nil
}
