package mpi

// Collectives with layouts. Each rank's contribution is the elements its
// send layout selects; where a call gathers one block per rank, rank r's
// block is the receive layout placed r extents in (MPI's recvcount 1 of
// a derived type: Contiguous(c.Size()).Of(rl)), so that the layout's
// Extent, which Resized sets, spaces the blocks. As for point-to-point,
// the two sides' layouts need only select the same number of elements,
// and every rank must contribute the same number. The data travels packed
// (layout_pack.go) through the same algorithms as the slice forms.

// BcastLayout copies the elements of root's buf that l selects into the
// elements every other rank's l selects (MPI_Bcast with a derived
// datatype).
func BcastLayout[T Element](c *Comm, buf []T, l Layout, root int) error {
	const op = "BcastLayout"
	v, err := c.begin(op)
	if err != nil {
		return err
	}
	w, err := wireFor(op, buf, l, root, c.rank == root)
	defer w.release()
	var cl call
	if err == nil {
		err = bcastCall(op, c, w.b, root, &cl)
	}
	err = finishCall(op, &v, &cl, err)
	if c.rank != root {
		w.unpackTo(elemBytes(buf), l, elemSize[T](), len(w.b), err)
	}
	return c.fail(err)
}

// GatherLayout collects the elements of every rank's sendbuf that sl
// selects into root's recvbuf, rank r's into rl placed r*rl.Extent()
// elements in (MPI_Gather with derived datatypes). recvbuf and rl matter
// at root only.
func GatherLayout[T Element](c *Comm, sendbuf []T, sl Layout, recvbuf []T, rl Layout, root int) error {
	const op = "GatherLayout"
	v, err := c.begin(op)
	if err != nil {
		return err
	}
	out, err := wireFor(op, sendbuf, sl, root, true)
	defer out.release()
	var in wire
	var all Layout
	if err == nil && c.rank == root {
		all, err = perRank(op, c, rl, sl)
		if err == nil {
			in, err = wireFor(op, recvbuf, all, root, false)
		}
	}
	defer in.release()
	var cl call
	if err == nil {
		err = gatherCall(op, c, out.b, in.b, root, &cl)
	}
	err = finishCall(op, &v, &cl, err)
	if c.rank == root {
		in.unpackTo(elemBytes(recvbuf), all, elemSize[T](), len(in.b), err)
	}
	return c.fail(err)
}

// ScatterLayout sends to each rank r the elements of root's sendbuf that
// sl selects placed r*sl.Extent() elements in, and stores them in the
// elements of rank r's recvbuf that rl selects (MPI_Scatter with derived
// datatypes). sendbuf and sl matter at root only.
func ScatterLayout[T Element](c *Comm, sendbuf []T, sl Layout, recvbuf []T, rl Layout, root int) error {
	const op = "ScatterLayout"
	v, err := c.begin(op)
	if err != nil {
		return err
	}
	in, err := wireFor(op, recvbuf, rl, root, false)
	defer in.release()
	var out wire
	if err == nil && c.rank == root {
		var all Layout
		all, err = perRank(op, c, sl, rl)
		if err == nil {
			out, err = wireFor(op, sendbuf, all, root, true)
		}
	}
	defer out.release()
	var cl call
	if err == nil {
		err = scatterCall(op, c, out.b, in.b, root, &cl)
	}
	err = finishCall(op, &v, &cl, err)
	in.unpackTo(elemBytes(recvbuf), rl, elemSize[T](), len(in.b), err)
	return c.fail(err)
}

// AllgatherLayout collects the elements of every rank's sendbuf that sl
// selects into every rank's recvbuf, rank r's into rl placed
// r*rl.Extent() elements in (MPI_Allgather with derived datatypes).
func AllgatherLayout[T Element](c *Comm, sendbuf []T, sl Layout, recvbuf []T, rl Layout) error {
	const op = "AllgatherLayout"
	v, err := c.begin(op)
	if err != nil {
		return err
	}
	out, err := wireFor(op, sendbuf, sl, c.rank, true)
	defer out.release()
	var in wire
	var all Layout
	if err == nil {
		all, err = perRank(op, c, rl, sl)
	}
	if err == nil {
		in, err = wireFor(op, recvbuf, all, c.rank, false)
	}
	defer in.release()
	var cl call
	if err == nil {
		err = allgatherCall(op, c, out.b, in.b, &cl)
	}
	err = finishCall(op, &v, &cl, err)
	in.unpackTo(elemBytes(recvbuf), all, elemSize[T](), len(in.b), err)
	return c.fail(err)
}

// perRank is the layout of one block of l per rank of c, and checks that
// a block holds as many elements as own, this rank's side of the call.
func perRank(op string, c *Comm, l, own Layout) (Layout, error) {
	if l.err != nil {
		return l, reop(op, l.err)
	}
	if l.Size() != own.Size() {
		return l, errorf(ErrCount, op, "a block of %d elements per rank where this rank's own holds %d", l.Size(), own.Size())
	}
	all := Contiguous(c.Size()).Of(l)
	return all, reop(op, all.err)
}
