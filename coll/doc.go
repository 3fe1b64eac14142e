// Package coll holds the collective algorithms and the tables that choose
// among them. Package mpi is its only caller.
//
// # Shape
//
// An algorithm is a plain function with a uniform signature,
//
//	func allreduceRing(c *Comm, a *Args) error
//
// that sees only a Comm (its rank, its size, its members' nodes, and byte
// sends and receives on the communicator's collective context) and the
// call's arguments in bytes (Args; each collective's file says what the
// fields mean). Where practical an algorithm first computes its per-rank
// schedule as pure data (schedule.go: who sends which blocks to whom, step
// by step) and then runs it (run.go); the schedules are unit-tested by
// simulating every rank at once, without a network (schedule_test.go).
// The choice is made apart from the algorithms (select.go, tables.go), as
// in Open MPI's tuned component: the override GORUN_COLL_<NAME>=<algorithm>
// (or SetAlgorithm) if it applies to the call, else the hierarchical
// algorithm when the communicator spans several nodes, else the
// measured table by process count and message size (MEASUREMENTS.md holds
// the figures behind every threshold).
//
// Algorithms: Barrier (dissemination, recursive doubling, linear, tree),
// Bcast (binomial, linear, pipeline, scatter+allgather), Reduce (ordered
// binomial, linear, binomial, pipeline, Rabenseifner), Allreduce
// (recursive doubling, reduce+bcast, ring, Rabenseifner), Gather and
// Scatter (linear, binomial), Gatherv and Scatterv (linear), Allgather
// (ring, recursive doubling, Bruck, linear, direct), Allgatherv (ring,
// direct), Alltoall (linear, pairwise, Bruck), Alltoallv (linear,
// pairwise), Reduce_scatter(_block) (reduce+scatter, ring, recursive
// halving), Scan and Exscan (recursive doubling, linear), and a
// hierarchical variant (intra-node, then one leader per node, then
// intra-node again, each level with the table's flat choice) of Barrier,
// Bcast, Reduce and Allreduce. Neighbourhood collectives (neighbor.go)
// have one algorithm, every exchange posted at once, and no table.
//
// GPU collectives (gpu.go, gpualg.go, gpuipc.go, gpupush.go, gpuentry.go) take device
// buffers in Args.SendD and RecvD and are registered as collectives of
// their own (gpu_allreduce, ...): ipc (per-communicator CUDA IPC regions:
// one copy-engine push and two empty host messages per call), push (the
// allreduce on those regions in one kernel: push, flags, fold), twoshot
// (the allreduce as the reduce-scatter push kernel, then the allgather
// push kernel, then the one-shot push of what their 16-byte blocks
// leave), oneshot (device point-to-point, pipelined pieces reduced on arrival), ring, and
// plain movements for bcast, allgather, gather, scatter and alltoall. They
// move bytes through p2p's device path and reduce with package gpu's
// kernels.
//
// # Calls, tags and concurrency
//
// A call begins with Comm.Begin, in the caller's goroutine, which takes
// the communicator's next sequence number: every rank must begin the same
// calls in the same order (MPI's rule for collectives). The call's tag is
// made from that number, so calls in flight at once (nonblocking
// collectives, which package mpi runs each in a goroutine of its own)
// never match each other's messages, and p2p's per-sender order makes the
// messages of one call pair up. Collectives run on the communicator's
// collective context (its point-to-point context + 1), so they never mix
// with point-to-point traffic or with another communicator's.
//
// An algorithm blocks in the calling goroutine, polling the transports
// through p2p's waits. Buffers in Args belong to the call until it
// returns; algorithms take scratch from a pool (getBuf) and never keep a
// caller's buffer afterwards.
//
// # Failures
//
// A rank whose call fails (a receive of the wrong length when the ranks
// passed mismatched counts, arguments package mpi rejected after Begin, a
// dead peer) tells every other rank with Comm.Abort, and a rank that has
// waited in a call for GORUN_COLL_STALL (2 s) asks the others how they run
// it: mismatched counts can make ranks pick different algorithms (or
// segment counts) and wait for each other with no message of the wrong
// size ever arriving, and a rank that ran the call differently then
// aborts it for everyone with a count error. notice.go has the protocol.
// Every wait inside a call also waits for these notices, so no rank waits
// forever in a call that another rank got wrong; later calls are
// unaffected, since their tags are new. State that the calls share and
// that is set up once (the shared-memory segment) is set up at a point
// every rank reaches alike, whatever its arguments (Comm.Prepare, at a
// communicator's first blocking call), on a channel of its own that an
// abort leaves alone, so that it ends alike everywhere.
//
// Reductions work on bytes through an Op supplied by package mpi, which
// knows the datatypes. Op.Apply(in, inout) sets inout = in ⊕ inout where
// in holds the contribution of lower ranks, so that the algorithms marked
// for any operation keep rank order for non-commutative ones; the others
// are chosen for commutative operations only.
package coll
