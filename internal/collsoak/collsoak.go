// Package collsoak runs a random schedule of collective calls and checks
// every result against the one computed here from the inputs: the
// differential soak of the collectives (bench/collsoak runs it for long;
// tests/collsoak_test.go briefly on every change).
//
// Every rank draws the same schedule from the seed: each call's
// collective (all of them, blocking, and bursts of nonblocking ones
// waited for together), its communicator (the world, a Dup of it, the
// world's ranks in reverse order, the half of the ranks of this rank's
// parity, where each half runs the call on its own, or on host memory
// the intercommunicator between the halves and, for the neighborhood
// calls, the world as a periodic ring: inter.go), its size
// (log-uniform up to Config.Max, half of the time one of the sizes where
// the algorithms change: the shared-memory ready line's 24 bytes, the
// ring stamp's 56, the ring's 1 KiB, a slot's 64 KiB, the tree's 2 KiB),
// its root, its operation (Sum, Max, Min, Bxor on int64; Sum on float64
// of small integers, exact), in place or not, persistent or not (host
// memory: XInit, then runs of Start and Wait), and whether a rank sleeps
// first (the others then run ahead, through the bcast ring and eager
// messages); and now and then a communicator made, used a few calls and
// freed. Every rank's input is a function of the call, the rank and
// the element, so every rank knows what every result must be. With
// Config.GPU the buffers are device memory and the calls the GPU ones.
package collsoak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/internal/soak"
	"github.com/gorun/gorun/mpi"
)

// Config is a soak's schedule.
type Config struct {
	Calls int    // collective calls (a burst of nonblocking ones counts as one)
	Seed  uint64 // the schedule's seed: the same at every rank
	Max   int    // largest buffer a rank passes, in bytes
	Slow  int    // one call in Slow starts with one rank asleep for up to 2 ms; 0: never
	// GPU: the buffers are device memory (world rank r on GPU r mod the
	// GPUs there are) and the calls the GPU ones (mpi.AllreduceGPU & co.;
	// no Bxor: Sum, Max and Min on int64).
	GPU bool
}

// edges are sizes in bytes where the algorithms change (see the package
// comment).
var edges = []int{0, 8, 16, 24, 32, 48, 56, 64, 72, 1016, 1024, 1032, 2048, 2056, 16 << 10, 64 << 10, 64<<10 + 8, 128 << 10,
	256 << 10, 256<<10 + 8, 512 << 10} // the last: the GPU algorithms' 256 KiB a rank

// kinds are the blocking calls; "nb" is a burst of nonblocking ones.
var kinds = []string{"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter",
	"reduce_scatter_block", "reduce_scatter", "scan", "exscan", "allgatherv", "alltoallv", "gatherv", "scatterv", "nb"}

var nbKinds = []string{"ibarrier", "ibcast", "ireduce", "iallreduce", "iallgather", "ialltoall", "ireduce_scatter_block"}

// call is one drawn call.
type call struct {
	step    int
	comm    int // index into the communicators
	kind    string
	bytes   int // a rank's buffer, or a block of one
	root    int // drawn; taken mod the communicator's size
	op      int // index into ops
	float   bool
	inPlace bool
	sleeper int // rank (mod size) that sleeps first; -1: none
	nap     time.Duration
	run     int // a persistent call's run: other inputs, the same counts
}

var ops = []struct {
	name string
	op   mpi.Op
	f    func(a, b int64) int64
}{
	{"sum", mpi.Sum, func(a, b int64) int64 { return a + b }},
	{"max", mpi.Max, func(a, b int64) int64 { return max(a, b) }},
	{"min", mpi.Min, func(a, b int64) int64 { return min(a, b) }},
	{"bxor", mpi.Bxor, func(a, b int64) int64 { return a ^ b }}, // last: no GPU kernel
}

func (k *call) String() string {
	on := fmt.Sprintf("communicator %d", k.comm)
	switch k.comm {
	case -1:
		on = "the intercommunicator of the halves"
	case -2:
		on = "the world as a periodic ring"
	case -3:
		on = "a communicator split off for a few calls"
	}
	s := fmt.Sprintf("call %d: %s of %d bytes on %s, root %d", k.step, k.kind, k.bytes, on, k.root)
	if k.float {
		s += ", float64 sum"
	} else {
		s += ", " + ops[k.op].name
	}
	if k.inPlace {
		s += ", in place"
	}
	return s
}

// draw returns call step of the schedule; every rank draws the same.
// On GPUs the operation is not Bxor (no kernel).
func draw(rng *rand.Rand, step, maxBytes, slow int, onGPU bool) call {
	nops := len(ops)
	if onGPU {
		nops--
	}
	k := call{step: step, comm: rng.IntN(4), kind: kinds[rng.IntN(len(kinds))], root: rng.IntN(1 << 20),
		op: rng.IntN(nops), float: rng.IntN(4) == 0, inPlace: rng.IntN(3) == 0, sleeper: -1}
	if rng.IntN(2) == 0 {
		k.bytes = edges[rng.IntN(len(edges))]
	} else {
		k.bytes = int(float64(maxBytes) * rng.Float64() * rng.Float64() * rng.Float64())
	}
	k.bytes = min(k.bytes, maxBytes) &^ 7
	if slow > 0 && rng.IntN(slow) == 0 {
		k.sleeper = rng.IntN(1 << 20)
		k.nap = time.Duration(rng.IntN(2000)) * time.Microsecond
	}
	return k
}

// drawBlocking is draw of a blocking call of up to 64 KiB (not a burst,
// no rank asleep) numbered step, on communicator comm.
func drawBlocking(rng *rand.Rand, step, comm int, onGPU bool) call {
	m := draw(rng, step, 64<<10, 0, onGPU)
	for m.kind == "nb" {
		m.kind = kinds[rng.IntN(len(kinds))]
	}
	m.comm = comm
	return m
}

// value is rank r's element i of call step: the inputs every rank can
// compute for every other.
func value(step, r, i int) int64 {
	return int64(soak.Mix(soak.Mix(soak.Mix(uint64(step))+uint64(r)) + uint64(i)))
}

// Run runs cfg's schedule on w and its derived communicators and returns
// how many calls of each kind this rank made; the first wrong result or
// failed call ends it with an error that names the call.
func Run(w *mpi.Comm, cfg Config) (map[string]int, error) {
	dup, err := w.Dup()
	if err != nil {
		return nil, err
	}
	defer dup.Free()
	rev, err := w.Split(0, w.Size()-w.Rank())
	if err != nil {
		return nil, err
	}
	defer rev.Free()
	half, err := w.Split(w.Rank()%2, w.Rank())
	if err != nil {
		return nil, err
	}
	defer half.Free()
	comms := []*mpi.Comm{w, dup, rev, half}
	// The intercommunicator between the halves (their leaders are world
	// ranks 0 and 1).
	var inter *mpi.Comm
	if w.Size() > 1 {
		if inter, err = half.IntercommCreate(0, w, 1-w.Rank()%2, 77); err != nil {
			return nil, err
		}
		defer inter.Free()
	}
	dev := -1
	if cfg.GPU {
		n, err := gpu.DeviceCount()
		if err != nil {
			return nil, fmt.Errorf("collsoak: GPU buffers: %w", err)
		}
		dev = w.Rank() % n
	}
	// The world as a periodic ring, for the neighborhood calls (from
	// three ranks: with two, both neighbors are one rank).
	var ring *mpi.Comm
	if w.Size() >= 3 {
		if ring, err = mpi.CartCreate(w, []int{w.Size()}, []bool{true}, false); err != nil {
			return nil, err
		}
		defer ring.Free()
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	count := map[string]int{}
	for step := range cfg.Calls {
		k := draw(rng, step, cfg.Max, cfg.Slow, cfg.GPU)
		nb := 0
		if k.kind == "nb" {
			nb = 1 + rng.IntN(3)
		}
		// One call in five on host memory is on the intercommunicator.
		if rng.IntN(5) == 0 && !cfg.GPU && inter != nil {
			k.kind = interKinds[slices.Index(kinds, k.kind)%len(interKinds)]
			k.comm = -1
			if err := runInter(inter, w.Rank()%2, &k); err != nil {
				return count, fmt.Errorf("%v: %w", &k, err)
			}
			count["inter_"+k.kind]++
			continue
		}
		// One call in forty makes a communicator (a Split of the world
		// into one to three colors), runs a few calls on it and frees
		// it: set-ups and teardowns (shared-memory segments, GPU
		// regions, context ids) all along the run.
		if rng.IntN(40) == 0 {
			if err := churn(w, &k, rng, dev, count); err != nil {
				return count, err
			}
			continue
		}
		// One call in twenty on host memory is a neighborhood call.
		if rng.IntN(20) == 0 && !cfg.GPU && ring != nil {
			k.kind = []string{"neighbor_allgather", "neighbor_alltoall"}[k.root%2]
			k.comm = -2
			if err := runNeighbor(ring, &k); err != nil {
				return count, fmt.Errorf("%v: %w", &k, err)
			}
			count[k.kind]++
			continue
		}
		c := comms[k.comm]
		if k.sleeper >= 0 && c.Rank() == k.sleeper%c.Size() {
			time.Sleep(k.nap)
		}
		if nb > 0 {
			if err := burst(c, &k, rng, nb, dev, count); err != nil {
				return count, err
			}
			continue
		}
		// One blocking call in eight on host memory is persistent
		// (XInit, then two or three runs of Start and Wait).
		runs := 0
		if rng.IntN(8) == 0 && !cfg.GPU {
			runs = 2 + rng.IntN(2)
		}
		var err error
		if runs > 0 {
			err = runPersistent(c, &k, runs)
			k.kind += "_init"
		} else {
			err = runOne(c, &k, dev)
		}
		if err != nil {
			return count, fmt.Errorf("%v: %w", &k, err)
		}
		count[k.kind]++
	}
	return count, mpi.Barrier(w)
}

// churn splits w into one to three colors (world rank r's color drawn
// from the call, the same at every rank), runs two to five blocking
// calls drawn after k on the new communicator and frees it.
func churn(w *mpi.Comm, k *call, rng *rand.Rand, dev int, count map[string]int) error {
	colors := 1 + rng.IntN(3)
	ncalls := 2 + rng.IntN(4)
	color := int(uint64(value(k.step, w.Rank(), -9)) % uint64(colors))
	c, err := w.Split(color, w.Size()-w.Rank())
	if err != nil {
		return fmt.Errorf("call %d: split into %d colors: %w", k.step, colors, err)
	}
	count["comms_made"]++
	for j := range ncalls {
		m := drawBlocking(rng, k.step*8+j+1<<40, -3, dev >= 0)
		if err := runOne(c, &m, dev); err != nil {
			c.Free()
			return fmt.Errorf("%v: %w", &m, err)
		}
		count["split_"+m.kind]++
	}
	return c.Free()
}
