package coll

import (
	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/internal/bufpool"
)

// Op is a reduction operation on bytes.
type Op interface {
	// Apply sets inout = in ⊕ inout elementwise; in holds the lower ranks'
	// contribution. Both have the same length, a multiple of the element
	// size.
	Apply(in, inout []byte)
	// Commutative reports whether operands may be reordered.
	Commutative() bool
}

// Op3 is implemented by operations that can also write their result to a
// third buffer (the vector Sum kernels): Apply3 sets out = in ⊕ inout
// elementwise, and out may be in or inout. The algorithms use it, through
// fold3 and foldInto, to skip a copy of the buffer.
type Op3 interface {
	Op
	Apply3(in, inout, out []byte)
}

// fold3 sets out = in ⊕ inout and leaves in and inout as they were; out
// must not overlap in (it may be inout).
func fold3(op Op, in, inout, out []byte) {
	if o, ok := op.(Op3); ok {
		o.Apply3(in, inout, out)
		return
	}
	copy(out, inout)
	op.Apply(in, out)
}

// foldInto sets acc = acc ⊕ scratch, where acc holds the lower ranks'
// part; scratch's content is lost.
func foldInto(op Op, acc, scratch []byte) {
	if o, ok := op.(Op3); ok {
		o.Apply3(acc, scratch, acc)
		return
	}
	op.Apply(acc, scratch)
	copy(acc, scratch)
}

// Args are a collective's arguments, in bytes. Each collective's entry
// point (select.go) says which fields it reads; a nil Send means "in
// place" where MPI has an in-place form.
type Args struct {
	// Send is this rank's contribution.
	Send []byte
	// Recv receives the result.
	Recv []byte
	// Counts and Displs are the byte count and offset of each rank's block
	// in Recv (Gatherv, Allgatherv, Alltoallv) or in Send (Scatterv), and
	// the block each rank receives (Reduce_scatter).
	Counts, Displs []int
	// SendCounts and SendDispls are Alltoallv's send side.
	SendCounts, SendDispls []int
	// Op and Elem (the element size in bytes) are a reduction's.
	Op   Op
	Elem int
	// Root is a rooted collective's root.
	Root int
	// SendD and RecvD are a GPU collective's device buffers (gpu.go), in
	// place of Send and Recv; SendD's zero value means in place. DOp is its
	// operation, run by package gpu's kernels, in place of Op.
	SendD, RecvD gpu.Buffer
	DOp          gpu.Op
	// Sources and Dests are a neighbourhood collective's neighbours, and
	// SrcCh and DstCh the sub-channel of each one's message (neighbor.go).
	Sources, Dests []int
	SrcCh, DstCh   []int
	// Nonblocking: the call is a nonblocking collective (it runs in a
	// goroutine of its own, possibly alongside other calls on the
	// communicator), which the shared-memory algorithms take only when
	// ShmReady, the view's ShmReady when the call began (nbturn.go).
	Nonblocking bool
	ShmReady    bool
	// Forced: the algorithm overrides (SetAlgorithm, GORUN_COLL_<NAME>)
	// when a nonblocking call began (Overrides), which its pick uses
	// wherever the call then runs; nil: those in force when it picks.
	Forced *Forced
}

// commutative reports whether a's operation (if any) may be reordered.
func (a *Args) commutative() bool { return a.Op == nil || a.Op.Commutative() }

// bufPool keeps scratch buffers by power-of-two size class, so that large
// collectives do not allocate (and zero) their scratch on every call.
var bufPool = bufpool.New(48)

// getBuf returns a scratch slice of n bytes (its content is undefined).
func getBuf(n int) []byte {
	if n == 0 {
		return nil
	}
	return bufPool.Get(n)
}

// putBufOK returns b to the pool if the algorithm that used it succeeded
// (*err nil; its deferred call sees the algorithm's result). After a
// failure b is left to the collector: a receive into it may have been
// matched and still be written (a rendezvous whose sender puts its part
// into our memory, frames still arriving), and a later call that took b
// from the pool would find the stale bytes landing in it. The GPU
// algorithms keep their device scratch the same way (devCall.done).
func putBufOK(b []byte, err *error) {
	if *err == nil {
		bufPool.Put(b)
	}
}
