package mpi

import "github.com/gorun/gorun/coll"

// Alltoallw and Neighbor_alltoallw: a datatype per block. MPI's per-block
// byte displacement and datatype become one Layout per block, applied, as
// every layout is, from index 0 of the buffer: the displacement is part of
// the layout (an Indexed or IndexedBlock one, a Subarray, or any layout
// Of'd into an Indexed one). The blocks are packed into one contiguous
// buffer, moved as by Alltoallv or NeighborAlltoallv, and unpacked: one
// more copy on each side than the v forms, whatever the layouts.

// wBlocks checks the layouts of one side against buf and returns the
// element counts and displacements of their blocks packed one after the
// other, and the total.
func wBlocks(op, side string, buf int, ls []Layout) (counts, displs []int, total int, err error) {
	counts, displs = make([]int, len(ls)), make([]int, len(ls))
	for i, l := range ls {
		if err := l.check(op, buf); err != nil {
			return nil, nil, 0, errorf(ErrArg, op, "%s layout %d: %w", side, i, err)
		}
		counts[i], displs[i] = l.Size(), total
		total += l.Size()
	}
	return counts, displs, total, nil
}

// wCall is an Alltoallw-like call in packed form: the packed send
// blocks, the receive scratch and both sides' blocks.
type wCall[T Element] struct {
	sb, rb         []T
	sc, sd, rc, rd []int
}

// prepare checks both sides' layouts and packs the send blocks.
func (w *wCall[T]) prepare(op string, sendbuf []T, send []Layout, recvbuf []T, recv []Layout) error {
	var st, rt int
	var err error
	if w.sc, w.sd, st, err = wBlocks(op, "send", len(sendbuf), send); err != nil {
		return err
	}
	if w.rc, w.rd, rt, err = wBlocks(op, "receive", len(recvbuf), recv); err != nil {
		return err
	}
	w.sb, w.rb = make([]T, 0, st), make([]T, rt)
	for _, l := range send {
		w.sb, _ = Pack(w.sb, sendbuf, l)
	}
	return nil
}

// finish unpacks the received blocks into recvbuf, but for the sources
// that are ProcNull (skip; nil: none is).
func (w *wCall[T]) finish(recvbuf []T, recv []Layout, srcs []int) {
	for i, l := range recv {
		if srcs == nil || srcs[i] >= 0 {
			Unpack(recvbuf, l, w.rb[w.rd[i]:w.rd[i]+w.rc[i]])
		}
	}
}

// Alltoallw sends the elements send[r] selects of sendbuf to rank r and
// receives rank r's block into the elements recv[r] selects of recvbuf
// (MPI_Alltoallw, with layouts for MPI's datatypes and displacements).
// Each pair's layouts must select the same number of elements. sendbuf
// and recvbuf may be one slice (MPI_IN_PLACE, with the receive layouts
// passed for both sides): every block is packed before any is received.
//
// On an intercommunicator send[j] and recv[j] are for process j of the
// other group (RemoteSize layouts each), and sendbuf and recvbuf must not
// overlap (ErrBuffer: MPI has no in-place form there).
func Alltoallw[T Element](c *Comm, sendbuf []T, send []Layout, recvbuf []T, recv []Layout) error {
	const op = "Alltoallw"
	if c.IsInter() {
		return c.fail(interAlltoallw(op, c, sendbuf, send, recvbuf, recv))
	}
	v, err := c.begin(op)
	if err != nil {
		return err
	}
	var w wCall[T]
	var cl call
	if n := c.Size(); len(send) != n || len(recv) != n {
		err = errorf(ErrArg, op, "%d send and %d receive layouts for %d ranks", len(send), len(recv), n)
	} else if err = w.prepare(op, sendbuf, send, recvbuf, recv); err == nil {
		err = alltoallvCall(op, c, w.sb, w.sc, w.sd, w.rb, w.rc, w.rd, &cl)
	}
	if err = finishCall(op, &v, &cl, err); err == nil {
		w.finish(recvbuf, recv, nil)
	}
	return c.fail(err)
}

// NeighborAlltoallw is NeighborAlltoall with a layout per neighbour
// (MPI_Neighbor_alltoallw): the elements send[i] selects of sendbuf go to
// destination i, and source i's block lands in the elements recv[i]
// selects of recvbuf. Each edge's layouts must select the same number of
// elements; a ProcNull neighbour's block is neither sent nor received.
func NeighborAlltoallw[T Element](c *Comm, sendbuf []T, send []Layout, recvbuf []T, recv []Layout) error {
	const op = "NeighborAlltoallw"
	var w wCall[T]
	var srcs []int
	err := runNeighbor(op, c, func(nb *neighborhood) (coll.Args, error) {
		if len(send) != len(nb.dst) || len(recv) != len(nb.src) {
			return coll.Args{}, errorf(ErrArg, op, "%d send and %d receive layouts for %d destinations and %d sources", len(send), len(recv), len(nb.dst), len(nb.src))
		}
		if err := w.prepare(op, sendbuf, send, recvbuf, recv); err != nil {
			return coll.Args{}, err
		}
		srcs = nb.src
		return nbAlltoallv(op, w.sb, w.sc, w.sd, w.rb, w.rc, w.rd)(nb)
	})
	if err == nil {
		w.finish(recvbuf, recv, srcs)
	}
	return err
}

// interAlltoallw is Alltoallw on an intercommunicator: the blocks packed,
// moved as by its Alltoallv, unpacked.
func interAlltoallw[T Element](op string, c *Comm, sendbuf []T, send []Layout, recvbuf []T, recv []Layout) error {
	var w wCall[T]
	err := interDisjoint(op, sendbuf, recvbuf)
	if n := c.RemoteSize(); err == nil && (len(send) != n || len(recv) != n) {
		err = errorf(ErrArg, op, "%d send and %d receive layouts for %d remote processes", len(send), len(recv), n)
	}
	if err == nil {
		err = w.prepare(op, sendbuf, send, recvbuf, recv)
	}
	ic := interAlltoallv(op, c, w.sb, w.sc, w.sd, w.rb, w.rc, w.rd)
	if err != nil {
		ic.err = err // bad arguments: the call aborts at every process
	}
	if err := c.interRun(ic); err != nil {
		return err
	}
	w.finish(recvbuf, recv, nil)
	return nil
}
