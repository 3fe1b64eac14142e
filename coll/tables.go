package coll

// The selection tables: which flat algorithm a call runs, by process
// count n and message size in bytes (what "size" means is per collective:
// entry.go). The thresholds come from coll/tune runs committed in
// coll/measurements/ and summarised in MEASUREMENTS.md (section names in
// the comments below); the hierarchical algorithms are chosen before the
// table whenever a communicator spans several nodes (select.go).

func isPow2(n int) bool { return n&(n-1) == 0 }

const (
	// allreduceSmall: up to here recursive doubling (log2 n exchanges of
	// the whole buffer) wins; above, Rabenseifner (MEASUREMENTS.md,
	// Allreduce: at 32 KiB Rabenseifner 18.7 µs against 31.0 at np 4 on
	// shared memory, 38.7 against 77.6 at np 16; at 8 KiB recursive
	// doubling 7.1 against 9.8, 22.1 against 27.2).
	allreduceSmall = 16 << 10
)

// tableAllreduce: ring never wins here (at np 16 and 512 KiB Rabenseifner
// takes 400 µs, ring 467), so the table leaves it to the override.
func tableAllreduce(n, size int, commutative bool) string {
	if !commutative || size <= allreduceSmall {
		return "recursive_doubling"
	}
	return "rabenseifner"
}

const (
	// bcastLinearMax: at np <= 4 the root's sends at once beat the tree
	// up to here (np 4, 32 KiB: linear 12.5 µs, binomial 15.0 on shared
	// memory; 28.4 against 33.1 over TCP).
	bcastLinearMax = 64 << 10
	// bcastScatterMin, bcastScatterMax: from np 16 on, scatter+allgather
	// beats the binomial tree in this band (np 16, 128 KiB: 152 µs against
	// 183; np 32: 232 against 260), but not at 512 KiB at np 32 (646
	// against 522).
	bcastScatterMin = 128 << 10
	bcastScatterMax = 256 << 10
)

// tableBcast: the pipeline never wins on these machines (np 4, 512 KiB:
// 200 µs against 83 for linear) and is left to the override.
func tableBcast(n, size int, _ bool) string {
	switch {
	case n <= 4 && size <= bcastLinearMax:
		return "linear"
	case n >= 16 && size >= bcastScatterMin && size <= bcastScatterMax:
		return "scatter_allgather"
	default:
		return "binomial"
	}
}

// reduceLarge: above this, from np 8 on, Rabenseifner's reduce-scatter
// and gather beat the binomial tree (np 16, 128 KiB: 73 µs against 98;
// np 32: 122 against 131); at np 4 the tree still wins at 512 KiB (133
// against 165).
const reduceLarge = 64 << 10

func tableReduce(n, size int, commutative bool) string {
	switch {
	case !commutative:
		return "ordered"
	case n >= 8 && size > reduceLarge:
		return "rabenseifner"
	default:
		return "binomial"
	}
}

func tableBarrier(n, _ int, _ bool) string {
	// Dissemination and recursive doubling are within noise of each other
	// at every np measured (np 32: 11.6 and 11.5 µs).
	return "dissemination"
}

// gatherSmall: the binomial tree's log2(n) steps pay from np 8 on for
// small blocks; at np <= 4 linear is as fast or faster at every size (np
// 4, 8 KiB: linear 5.4 µs, binomial 7.4).
const gatherSmall = 4 << 10

func tableGather(n, size int, _ bool) string {
	if n >= 8 && size <= gatherSmall {
		return "binomial"
	}
	return "linear"
}

func tableScatter(n, size int, c bool) string { return tableGather(n, size, c) }

// allgatherSmall: up to this block size Bruck's ceil(log2 n) rounds win
// (np 16, 2 KiB: Bruck 17.2 µs, recursive doubling 17.6, ring 42.4; np 4,
// 512 B: 3.3 against 4.2); above, recursive doubling where n is a power
// of two (np 32, 128 KiB: 1199 µs, ring 1667), the ring otherwise.
const allgatherSmall = 2 << 10

func tableAllgather(n, size int, _ bool) string {
	switch {
	case size <= allgatherSmall:
		return "bruck"
	case isPow2(n):
		return "recursive_doubling"
	case n <= 4:
		return "direct"
	default:
		return "ring"
	}
}

func tableAllgatherv(n, size int, _ bool) string {
	if n <= 4 || size <= allgatherSmall*n {
		return "direct"
	}
	return "ring"
}

// alltoallSmall: Bruck's log2(n) rounds win up to this block size (np
// 16, 512 B: 17.8 µs against 20.7 for linear; np 32: 33.8 against 43.0);
// above, everything posted at once (np 32, 8 KiB: linear 125 µs, Bruck
// 359).
const alltoallSmall = 512

func tableAlltoall(n, size int, _ bool) string {
	if n > 2 && size <= alltoallSmall {
		return "bruck"
	}
	return "linear"
}

func tableAlltoallv(n, size int, _ bool) string { return "linear" }

// tableReduceScatter: recursive halving where it applies (np 4, 128 KiB:
// 38 µs, ring 42, reduce+scatter 63).
func tableReduceScatter(n, size int, commutative bool) string {
	switch {
	case !commutative:
		return "reduce_scatter"
	case isPow2(n):
		return "recursive_halving"
	default:
		return "ring"
	}
}

// scanLarge: above this the chain wins (np 4, 32 KiB: linear 25.9 µs,
// recursive doubling 30.5), as it does at every size at np 2 (one message
// instead of an exchange and two reductions).
const scanLarge = 16 << 10

func tableScan(n, size int, _ bool) string {
	if n <= 2 || size > scanLarge {
		return "linear"
	}
	return "recursive_doubling"
}
