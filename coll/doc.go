// Package coll holds the collective algorithms and the tables that choose
// among them. An algorithm sees only a Comm (its rank, its size, and byte
// sends and receives on the communicator's collective context) and the
// arguments; the choice of algorithm is made apart from the algorithms
// (select.go), as in Open MPI's tuned component.
//
// Collectives of one communicator run on their own context id, so their
// traffic never mixes with point-to-point traffic or with another
// communicator's. Every rank must call the same collectives in the same
// order (MPI's rule); fixed tags per collective then suffice, because p2p
// keeps order per sender and context.
//
// Reductions work on bytes through an Op supplied by package mpi, which
// knows the datatypes. Op.Apply(in, inout) sets inout = in ⊕ inout where in
// holds the contribution of lower ranks, so non-commutative operations keep
// rank order when an algorithm respects it.
//
// This is the first slice: Barrier, Bcast, Reduce and Allreduce with a few
// algorithms each. The rest of MPI's collectives come with their own issue.
package coll
