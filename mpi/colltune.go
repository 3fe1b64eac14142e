package mpi

import (
	"github.com/gorun/gorun/coll"
)

// SetCollAlgorithm forces algorithm alg for collective name in this
// process, as the environment variable GORUN_COLL_<NAME>=<alg> does at
// start-up; "" restores the measured selection table. Names are the lower
// case MPI ones: "allreduce", "bcast", "reduce_scatter_block"...
// (Collectives lists them, CollAlgorithms their algorithms). An algorithm
// that does not apply to a call (one for commutative operations only,
// one for power-of-two sizes, a hierarchical one on a single node) falls
// back to the table for that call. Every rank must make the same choice
// before the calls it is meant to affect. Like an MPI_T control variable,
// it is meant for tuning and testing.
func SetCollAlgorithm(name, alg string) error {
	if err := coll.SetAlgorithm(name, alg); err != nil {
		return &Error{Class: ErrArg, Op: "SetCollAlgorithm", Err: err}
	}
	return nil
}

// CollAlgorithms lists the algorithms of collective name (nil for an
// unknown name).
func CollAlgorithms(name string) []string { return coll.Algorithms(name) }

// Collectives lists the collectives by the names SetCollAlgorithm takes.
func Collectives() []string { return coll.Collectives() }
