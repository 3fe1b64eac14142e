package collsoak

import (
	"fmt"

	"github.com/gorun/gorun/mpi"
)

// Calls on the intercommunicator between the two parity halves (the even
// world ranks, group 0, and the odd ones, group 1): each group's results
// come from the other's inputs. A process's inputs are those of id(g, r),
// its group and rank there. And the neighborhood calls on the world as a
// ring.

// interKinds are the calls made on the intercommunicator; a drawn kind
// that is not one of them is taken as interKinds[its index mod their
// number].
var interKinds = []string{"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter", "reduce_scatter_block"}

func id(g, r int) int { return g<<10 | r }

// interPlan makes call k's plan at this process (group g) of the
// intercommunicator ic. The root is rank k.root/2 of group k.root%2; in
// its group it passes mpi.Root and the others mpi.ProcNull, in the other
// group every process passes its rank.
func interPlan[T elem](ic *mpi.Comm, g int, k *call) (*plan[T], error) {
	me, local, remote := ic.Rank(), ic.Size(), ic.RemoteSize()
	p := &plan[T]{kind: k.kind}
	p.op, _ = foldOf[T](k)
	n := k.bytes / 8
	blk := n / max(local, remote)
	rg := k.root % 2 // the root's group
	rsize := local
	if rg != g {
		rsize = remote
	}
	rr := k.root / 2 % rsize // its rank there
	switch {
	case rg != g:
		p.root = rr
	case me == rr:
		p.root = mpi.Root
	default:
		p.root = mpi.ProcNull
	}
	// the other group's inputs: the fold of their n elements from at on,
	// and the check of their blocks of blk elements in got
	other := func(r int) int { return id(1-g, r) }
	fromRemote := func(at, n int) []T { return foldedOf[T](k, remote, other, at, n) }
	remoteBlocks := func(what string, got []T, want func(r int) []T) error {
		return blocks(what+" (from the other group)", remote, got, func(r int) int { return r * blk }, want)
	}
	p.check = func() error { return nil }
	switch k.kind {
	case "barrier":
	case "bcast":
		p.recv = make([]T, n)
		switch p.root {
		case mpi.Root:
			copy(p.recv, inputs[T](k, id(g, me), 0, n))
		case mpi.ProcNull:
		default:
			p.check = func() error { return same("bcast", p.recv, inputs[T](k, id(rg, rr), 0, n)) }
		}
	case "reduce":
		if p.root == mpi.Root {
			p.recv = make([]T, n)
			p.check = func() error { return same("reduce at the root", p.recv, fromRemote(0, n)) }
		} else if p.root != mpi.ProcNull {
			p.send = inputs[T](k, id(g, me), 0, n)
		}
	case "allreduce":
		p.send, p.recv = inputs[T](k, id(g, me), 0, n), make([]T, n)
		p.check = func() error { return same("allreduce", p.recv, fromRemote(0, n)) }
	case "allgather":
		p.send, p.recv = inputs[T](k, id(g, me), 0, blk), make([]T, blk*remote)
		p.check = func() error {
			return remoteBlocks("allgather", p.recv, func(r int) []T { return inputs[T](k, id(1-g, r), 0, blk) })
		}
	case "alltoall":
		p.send, p.recv = inputs[T](k, id(g, me), 0, blk*remote), make([]T, blk*remote)
		p.check = func() error {
			return remoteBlocks("alltoall", p.recv, func(r int) []T { return inputs[T](k, id(1-g, r), me*blk, blk) })
		}
	case "gather":
		switch p.root {
		case mpi.Root:
			p.recv = make([]T, blk*remote)
			p.check = func() error {
				return remoteBlocks("gather at the root", p.recv, func(r int) []T { return inputs[T](k, id(1-g, r), 0, blk) })
			}
		case mpi.ProcNull:
		default:
			p.send = inputs[T](k, id(g, me), 0, blk)
		}
	case "scatter":
		switch p.root {
		case mpi.Root:
			p.send = inputs[T](k, id(g, me), 0, blk*remote)
		case mpi.ProcNull:
		default:
			p.recv = make([]T, blk)
			p.check = func() error { return same("scatter", p.recv, inputs[T](k, id(rg, rr), me*blk, blk)) }
		}
	case "reduce_scatter_block":
		// Every process of both groups sends L elements; the other
		// group's reduce into this one, L/local to each rank (L a
		// multiple of both sizes).
		l := max(1, n/(local*remote)) * local * remote
		p.send, p.recv = inputs[T](k, id(g, me), 0, l), make([]T, l/local)
		p.check = func() error { return same("reduce_scatter_block", p.recv, fromRemote(me*(l/local), l/local)) }
	default:
		return nil, fmt.Errorf("collsoak: no intercommunicator call %q", k.kind)
	}
	return p, nil
}

// runInter makes call k on ic at this process (group g) and checks it.
func runInter(ic *mpi.Comm, g int, k *call) error {
	if k.float {
		return runInterT[float64](ic, g, k)
	}
	return runInterT[int64](ic, g, k)
}

func runInterT[T elem](ic *mpi.Comm, g int, k *call) error {
	p, err := interPlan[T](ic, g, k)
	if err != nil {
		return err
	}
	return p.run(ic, -1)
}

// runNeighbor makes a neighborhood call on ring, the world as a periodic
// one-dimensional Cartesian grid of at least three ranks (neighbors:
// rank-1, then rank+1), and checks it: "neighbor_allgather" receives the
// left neighbor's block, then the right one's; "neighbor_alltoall" sends
// block 0 left and block 1 right, so it receives the left neighbor's
// block 1 and the right one's block 0.
func runNeighbor(ring *mpi.Comm, k *call) error {
	if k.float {
		return runNeighborT[float64](ring, k)
	}
	return runNeighborT[int64](ring, k)
}

func runNeighborT[T elem](ring *mpi.Comm, k *call) error {
	size, me := ring.Size(), ring.Rank()
	left, right := (me+size-1)%size, (me+1)%size
	blk := k.bytes / 16
	var err error
	var want []T
	recv := make([]T, 2*blk)
	if k.kind == "neighbor_allgather" {
		err = mpi.NeighborAllgather(ring, inputs[T](k, me, 0, blk), recv)
		want = append(inputs[T](k, left, 0, blk), inputs[T](k, right, 0, blk)...)
	} else {
		err = mpi.NeighborAlltoall(ring, inputs[T](k, me, 0, 2*blk), recv)
		want = append(inputs[T](k, left, blk, blk), inputs[T](k, right, 0, blk)...)
	}
	if err != nil {
		return err
	}
	return same(k.kind, recv, want)
}
