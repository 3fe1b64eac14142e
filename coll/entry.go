package coll

// The entry points. Each takes a view begun with Comm.Begin and the
// call's arguments in bytes (see each algorithm file for what the fields
// mean) and runs the algorithm picked for the call. On failure the caller
// tells the other ranks with Comm.Abort, so that none waits forever.

var (
	collBarrier, collBcast, collReduce, collAllreduce, collGather, collGatherv, collScatter, collScatterv, collAllgather, collAllgatherv, collAlltoall, collAlltoallv, collReduceScatter, collReduceScatterBlock, collScan, collExscan *collective
)

// The collectives are registered from init: their hierarchical algorithms
// refer back to them (bcastFlat, reduceFlat), a cycle a package-level
// initializer may not have.
func init() {
	collBarrier = register(&collective{name: "barrier", algs: []algorithm{
		{name: "dissemination", run: barrierDissemination},
		{name: "recursive_doubling", run: barrierRecursiveDoubling},
		{name: "linear", run: barrierLinear},
		{name: "tree", run: barrierTree},
		{name: "hier", run: barrierHier, hier: true},
		{name: "shm", run: barrierShm, shm: true},
	}, table: tableBarrier, size: func(*Comm, *Args) int { return 0 }})

	collBcast = register(&collective{name: "bcast", algs: []algorithm{
		{name: "binomial", run: bcastBinomial},
		{name: "linear", run: bcastLinear},
		{name: "pipeline", run: bcastPipeline},
		{name: "scatter_allgather", run: bcastScatterAllgather},
		{name: "hier", run: bcastHier, hier: true},
		{name: "shm", run: bcastShm, shm: true},
	}, table: tableBcast, size: func(_ *Comm, a *Args) int { return len(a.Recv) }})

	collReduce = register(&collective{name: "reduce", algs: []algorithm{
		{name: "ordered", run: reduceOrdered},
		{name: "linear", run: reduceLinear},
		{name: "binomial", run: reduceBinomial, commutative: true},
		{name: "pipeline", run: reducePipeline, commutative: true},
		{name: "rabenseifner", run: reduceRabenseifner, commutative: true},
		{name: "hier", run: reduceHier, commutative: true, hier: true},
		{name: "shm", run: reduceShm, shm: true},
	}, table: tableReduce, size: func(_ *Comm, a *Args) int { return len(a.own()) }})

	collAllreduce = register(&collective{name: "allreduce", algs: []algorithm{
		{name: "recursive_doubling", run: allreduceRecursiveDoubling},
		{name: "reduce_bcast", run: allreduceReduceBcast},
		{name: "ring", run: allreduceRing, commutative: true},
		{name: "rabenseifner", run: allreduceRabenseifner, commutative: true},
		{name: "hier", run: allreduceHier, commutative: true, hier: true},
		{name: "shm", run: allreduceShm, shm: true},
	}, table: tableAllreduce, size: func(_ *Comm, a *Args) int { return len(a.Recv) }})

	collGather = register(&collective{name: "gather", algs: []algorithm{
		{name: "linear", run: gatherLinear},
		{name: "binomial", run: gatherBinomial},
	}, table: tableGather, size: func(c *Comm, a *Args) int { return gatherBlock(c, a) }})

	collGatherv = register(&collective{name: "gatherv", algs: []algorithm{
		{name: "linear", run: gathervLinear},
	}, table: func(int, int, bool) string { return "linear" }, size: func(*Comm, *Args) int { return 0 }, varSize: true})

	collScatter = register(&collective{name: "scatter", algs: []algorithm{
		{name: "linear", run: scatterLinear},
		{name: "binomial", run: scatterBinomial},
	}, table: tableScatter, size: func(c *Comm, a *Args) int { return scatterBlock(c, a) }})

	collScatterv = register(&collective{name: "scatterv", algs: []algorithm{
		{name: "linear", run: scattervLinear},
	}, table: func(int, int, bool) string { return "linear" }, size: func(*Comm, *Args) int { return 0 }, varSize: true})

	collAllgather = register(&collective{name: "allgather", algs: []algorithm{
		{name: "ring", run: allgatherRing},
		{name: "recursive_doubling", run: allgatherRecursiveDoubling, pow2: true},
		{name: "bruck", run: allgatherBruck},
		{name: "linear", run: allgatherLinear},
		{name: "direct", run: allgatherDirect},
		{name: "shm", run: allgatherShm, shm: true},
	}, table: tableAllgather, size: func(c *Comm, a *Args) int { return gatherBlock(c, a) }})

	collAllgatherv = register(&collective{name: "allgatherv", algs: []algorithm{
		{name: "ring", run: allgathervRing},
		{name: "direct", run: allgathervDirect},
	}, table: tableAllgatherv, size: func(_ *Comm, a *Args) int { return sum(a.Counts) }})

	collAlltoall = register(&collective{name: "alltoall", algs: []algorithm{
		{name: "linear", run: alltoallLinear},
		{name: "pairwise", run: alltoallPairwise},
		{name: "bruck", run: alltoallBruck},
		{name: "shm", run: alltoallShm, shm: true, shmBytes: func(n, size int) int { return n * size }},
	}, table: tableAlltoall, size: func(c *Comm, a *Args) int { return len(a.Recv) / c.Size() }})

	collAlltoallv = register(&collective{name: "alltoallv", algs: []algorithm{
		{name: "linear", run: alltoallvLinear},
		{name: "pairwise", run: alltoallvPairwise},
	}, table: tableAlltoallv, size: func(_ *Comm, a *Args) int { return sum(a.Counts) }, varSize: true})

	collReduceScatter = register(&collective{name: "reduce_scatter", algs: []algorithm{
		{name: "reduce_scatter", run: reduceScatterReduce},
		{name: "ring", run: reduceScatterRing, commutative: true},
		{name: "recursive_halving", run: reduceScatterHalving, commutative: true, pow2: true},
	}, table: tableReduceScatter, size: func(_ *Comm, a *Args) int { return sum(a.Counts) }})

	collReduceScatterBlock = register(&collective{name: "reduce_scatter_block", algs: collReduceScatter.algs,
		table: tableReduceScatter, size: func(_ *Comm, a *Args) int { return sum(a.Counts) }})

	collScan = register(&collective{name: "scan", algs: []algorithm{
		{name: "recursive_doubling", run: scanRecursiveDoubling},
		{name: "linear", run: scanLinear},
	}, table: tableScan, size: func(_ *Comm, a *Args) int { return len(a.Recv) }})

	collExscan = register(&collective{name: "exscan", algs: []algorithm{
		{name: "recursive_doubling", run: exscanRecursiveDoubling},
		{name: "linear", run: exscanLinear},
	}, table: tableScan, size: func(_ *Comm, a *Args) int { return len(a.own()) }})
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// Barrier blocks until every rank of c has entered it. a carries only
// Nonblocking (nil: a blocking call): a nonblocking barrier (Ibarrier, a
// persistent one) must not take the shared-memory algorithm, which runs
// one blocking call at a time in call order.
func Barrier(c *Comm, a *Args) error {
	if a == nil {
		a = &Args{}
	}
	return collBarrier.call(c, a, nil)
}

// Bcast copies the root's a.Recv into every rank's a.Recv.
func Bcast(c *Comm, a *Args) error {
	return collBcast.call(c, a, nil)
}

func bcastFlat(c *Comm, a *Args) error { return collBcast.runFlat(c, a, nil) }

// Reduce combines every rank's a.Send (the root's may be nil: in place,
// in a.Recv) with a.Op into the root's a.Recv.
func Reduce(c *Comm, a *Args) error {
	return collReduce.call(c, a, a.seedRecv)
}

func reduceFlat(c *Comm, a *Args) error { return collReduce.runFlat(c, a, a.seedRecv) }

// Allreduce combines every rank's a.Send (nil: in place, in a.Recv) with
// a.Op into every rank's a.Recv.
func Allreduce(c *Comm, a *Args) error {
	return collAllreduce.call(c, a, a.seedRecv)
}

func allreduceFlat(c *Comm, a *Args) error { return collAllreduce.runFlat(c, a, a.seedRecv) }

// Gather collects every rank's a.Send into the root's a.Recv (block r at
// r*len). The root's a.Send may be nil (in place).
func Gather(c *Comm, a *Args) error {
	return collGather.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv, a.Send)
		}
	})
}

// Gatherv collects every rank's a.Send into the root's a.Recv at
// a.Displs[r] (a.Counts[r] bytes), both read at the root only.
func Gatherv(c *Comm, a *Args) error {
	return collGatherv.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv[a.Displs[0]:a.Displs[0]+a.Counts[0]], a.Send)
		}
	})
}

// Scatter sends block r of the root's a.Send to rank r's a.Recv. The
// root's a.Recv may be nil (in place).
func Scatter(c *Comm, a *Args) error {
	return collScatter.call(c, a, func() {
		if a.Recv != nil {
			copy(a.Recv, a.Send)
		}
	})
}

// Scatterv sends a.Counts[r] bytes at a.Displs[r] of the root's a.Send to
// rank r's a.Recv.
func Scatterv(c *Comm, a *Args) error {
	return collScatterv.call(c, a, func() {
		if a.Recv != nil {
			copy(a.Recv, a.Send[a.Displs[0]:a.Displs[0]+a.Counts[0]])
		}
	})
}

// Allgather collects every rank's a.Send into every rank's a.Recv (block
// r at r*len). a.Send may be nil (in place).
func Allgather(c *Comm, a *Args) error {
	return collAllgather.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv, a.Send)
		}
	})
}

// Allgatherv is Allgather with blocks of a.Counts[r] bytes at a.Displs[r].
func Allgatherv(c *Comm, a *Args) error {
	return collAllgatherv.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv[a.Displs[0]:a.Displs[0]+a.Counts[0]], a.Send)
		}
	})
}

// Alltoall sends block r of every rank's a.Send to rank r, which puts it
// at block (sender) of its a.Recv. a.Send may be nil (in place).
func Alltoall(c *Comm, a *Args) error {
	return collAlltoall.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv, a.Send)
		}
	})
}

func alltoallFlat(c *Comm, a *Args) error { return collAlltoall.runFlat(c, a, nil) }

// Alltoallv is Alltoall with per-rank counts and displacements on both
// sides.
func Alltoallv(c *Comm, a *Args) error {
	return collAlltoallv.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv[a.Displs[0]:a.Displs[0]+a.Counts[0]], a.Send[a.SendDispls[0]:a.SendDispls[0]+a.SendCounts[0]])
		}
	})
}

// ReduceScatter reduces the blocks of every rank's input (a.Send, or a.Recv
// when a.Send is nil) with a.Op and leaves block r, of a.Counts[r] bytes,
// at the start of rank r's a.Recv.
func ReduceScatter(c *Comm, a *Args) error {
	return collReduceScatter.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv, a.Send[:a.Counts[0]])
		}
	})
}

// ReduceScatterBlock is ReduceScatter with equal blocks; a.Counts must
// hold the block size n times.
func ReduceScatterBlock(c *Comm, a *Args) error {
	return collReduceScatterBlock.call(c, a, func() {
		if a.Send != nil {
			copy(a.Recv, a.Send[:a.Counts[0]])
		}
	})
}

// Scan leaves x0 ⊕ ... ⊕ xr in rank r's a.Recv.
func Scan(c *Comm, a *Args) error {
	return collScan.call(c, a, a.seedRecv)
}

// Exscan leaves x0 ⊕ ... ⊕ x(r-1) in rank r's a.Recv (rank 0's is left
// alone).
func Exscan(c *Comm, a *Args) error {
	return collExscan.call(c, a, nil)
}
