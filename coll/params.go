package coll

import (
	"time"

	"github.com/gorun/gorun/internal/params"
)

// Tunables of the collectives. GORUN_COLL_<NAME> (one per collective,
// declared in select.go with the algorithms it accepts) forces an
// algorithm; these are the others.
var (
	pSegSize = params.Int("GORUN_COLL_SEGSIZE", 0,
		"testing: segment size in bytes of the pipelined algorithms (bcast pipeline, reduce pipeline, ring allreduce); 0 uses each algorithm's measured default. Small values make tests cross many segments")
	pGPUChunk = params.Int("GORUN_COLL_GPU_CHUNK", 32<<20,
		"piece size in bytes of the pipelined one-shot GPU algorithms (the reduction of a piece overlaps the transfer of the next)")
	pGPURingPiece = params.Int("GORUN_COLL_GPU_RING_PIECE", 8<<20,
		"piece size in bytes of the GPU ring reduce-scatter's steps (at most 16 pieces a block): a piece is folded as soon as it is in and sent on as soon as its fold is done")
	pGPUHierRail = params.Int("GORUN_COLL_GPU_HIER_RAIL", 4<<20,
		"smallest GPU allreduce in bytes that the hierarchical algorithm runs by rails (each node reduce-scatters, the ranks of equal index on every node allreduce their block across the nodes, each node allgathers) when every node has as many ranks; below, or with uneven nodes, it reduces to each node's leader, allreduces among the leaders and broadcasts; 0: never by rails")
	pGPUHierRailAllgather = params.Int("GORUN_COLL_GPU_HIER_RAIL_ALLGATHER", 1<<20,
		"smallest block in bytes a rank that a GPU allgather across hosts runs by rails (the ranks of equal index on every node allgather across the nodes, then each node exchanges what its rails brought; nodes of equal size); below, the flat algorithm; 0: never by rails")
	pGPUHierRailReduceScatter = params.Int("GORUN_COLL_GPU_HIER_RAIL_REDUCE_SCATTER", 4<<20,
		"smallest block in bytes a rank that a GPU reduce_scatter_block across hosts runs by rails (each node reduce-scatters the blocks ordered by rail, then each rail across the nodes; nodes of equal size); below, the flat algorithm; 0: never by rails")
	pGPUSegments = params.Int("GORUN_COLL_GPU_SEGMENTS", 16,
		"how many segments the pipelined GPU broadcast (pipe) cuts a buffer into, each between 2 and 32 MiB")
	pPushSpin = params.Duration("GORUN_COLL_GPU_PUSH_SPIN", time.Millisecond,
		"how long a GPU push collective polls the completion word its kernel writes in host memory before it waits in cuStreamSynchronize instead; 0 synchronizes at once (a few microseconds more per call, MEASUREMENTS.md)")
	pGPUServe = params.Duration("GORUN_COLL_GPU_SERVE", 100*time.Microsecond,
		"how long a device's resident kernel, which runs the GPU push collectives handed to it through host memory instead of a launch a call (3-4 µs less a call, MEASUREMENTS.md), waits for the next call before it ends and gives its SMs back (a synchronization of the whole device by the program right after a call waits that long, and a kernel of the program's that fills the device in one wave, started meanwhile, runs some blocks in a second wave); 0: every push call launches its own kernel")
	pFakeNodes = params.Int("GORUN_COLL_FAKE_NODES", 0,
		"testing: pretend world rank r runs on node r mod N (N > 1), so that the hierarchical algorithms run on one host")
	pSeqSkip = params.Int("GORUN_COLL_SEQ_SKIP", 0,
		"testing: after every call whose number is a multiple of 64, the numbering jumps ahead this many, as if that many calls with no shared-memory algorithm had run (the same in every process; a jump of 2^37 or more crosses an epoch, whose renewal waits for the bcast ring's readers; a smaller one past 2^30 needs GORUN_COLL_SHM_AHEAD=0, since the ring takes a slot as free once its call is 2^30 calls back)")
	pSeqStart = params.Int("GORUN_COLL_SEQ_START", 0,
		"testing: number every communicator's collective calls from one past this on instead of from 1, so that tests cross the wrap of the widths the numbers are stored in (the same in every process; below 2^62, as the GPU push kernels number their launches four times the call's number)")
)

// segSize returns the segment size for a pipelined algorithm whose
// measured default is def, rounded down to whole elements of elem bytes
// (at least one element).
func segSize(def, elem int) int {
	s := def
	if v := pSegSize(); v > 0 {
		s = v
	}
	if elem < 1 {
		elem = 1
	}
	s -= s % elem
	if s < elem {
		s = elem
	}
	return s
}
