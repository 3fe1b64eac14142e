package mpi

import "github.com/gorun/gorun/coll"

// The collectives of an intercommunicator (intercomm.go): Barrier, Bcast,
// Reduce, Allreduce, Gather, Scatter, Allgather and Alltoall send here;
// coll/inter.go runs them.

// interRun runs fn on the union of the intercommunicator c's groups as one
// call; prepErr, a failed preparation, aborts the call instead, so that
// the other processes do not wait for this one.
func (c *Comm) interRun(op string, fn func(*coll.Comm, *coll.Args, int) error, a coll.Args, prepErr error) error {
	v, err := c.interBegin(op)
	if err != nil {
		return err
	}
	split := c.inter.splitAt(len(c.world))
	cl := call{fn: func(v *coll.Comm, a *coll.Args) error { return fn(v, a, split) }, args: a}
	return finish(op, &v, &cl, prepErr)
}

// unionRemote is the rank in the union of remote rank r.
func (c *Comm) unionRemote(r int) int {
	if c.inter.localFirst {
		return len(c.world) + r
	}
	return r
}

func interBarrier(c *Comm) error {
	return c.interRun("Barrier", func(v *coll.Comm, a *coll.Args, _ int) error { return coll.InterBarrier(v, a) }, coll.Args{}, nil)
}

// interBcast: root is Root at the root, ProcNull at the other processes
// of its group, and the root's rank in the remote group in the other
// group.
func interBcast[T Element](c *Comm, buf []T, root int) error {
	a := coll.Args{Recv: elemBytes(buf)}
	var err error
	a.Root, err = c.interRoot("Bcast", root)
	return c.interRun("Bcast", coll.InterBcast, a, err)
}

// interRoot is the root of a rooted intercommunicator collective in the
// union (coll's a.Root): this process at the root (Root), -1 at the other
// processes of its group (ProcNull), the root's union rank in the other
// group (its rank in the remote group).
func (c *Comm) interRoot(op string, root int) (int, error) {
	switch {
	case root == Root:
		return c.cc.Me, nil
	case root == ProcNull:
		return -1, nil
	case root >= 0 && root < c.RemoteSize():
		return c.unionRemote(root), nil
	}
	return -1, errorf(ErrRoot, op, "root %d on intercommunicator %s: Root, ProcNull or a rank of the remote group (size %d)", root, c.name, c.RemoteSize())
}

// interReduce: the root (Root) receives in recvbuf the reduction of the
// remote group's sendbufs, which have len(recvbuf) elements; the processes
// of the other group pass their sendbuf, those of the root's group
// ProcNull and nothing.
func interReduce[T Element](c *Comm, sendbuf, recvbuf []T, op Op, root int) error {
	const name = "Reduce"
	r, err := c.interRoot(name, root)
	o, berr := bind[T](name, op)
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf), Op: o, Elem: elemSize[T](), Root: r}
	return c.interRun(name, coll.InterReduce, a, firstErr(err, berr))
}

// interGather: the root (Root) receives the remote group's sendbufs, in
// its rank order, in recvbuf (RemoteSize blocks of the senders' length).
func interGather[T Element](c *Comm, sendbuf, recvbuf []T, root int) error {
	return interRooted(c, "Gather", coll.InterGather, sendbuf, recvbuf, recvbuf, "receive", root)
}

// interScatter: the root (Root) sends block j of sendbuf (RemoteSize
// blocks) to remote process j, which receives it in recvbuf.
func interScatter[T Element](c *Comm, sendbuf, recvbuf []T, root int) error {
	return interRooted(c, "Scatter", coll.InterScatter, sendbuf, recvbuf, sendbuf, "send", root)
}

// interRooted runs the intercommunicator Gather or Scatter, whose root's
// buffer rootBuf (its what buffer) holds one block per remote process.
func interRooted[T Element](c *Comm, name string, fn func(*coll.Comm, *coll.Args, int) error, sendbuf, recvbuf, rootBuf []T, what string, root int) error {
	r, err := c.interRoot(name, root)
	if err == nil && root == Root && len(rootBuf)%c.RemoteSize() != 0 {
		err = errorf(ErrCount, name, "%s buffer of %d elements for %d processes", what, len(rootBuf), c.RemoteSize())
	}
	return c.interRun(name, fn, coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf), Root: r}, err)
}

// interAlltoall: every process sends block j of sendbuf to remote process
// j and receives that process's block in block j of recvbuf (both of
// RemoteSize blocks).
func interAlltoall[T Element](c *Comm, sendbuf, recvbuf []T) error {
	const name = "Alltoall"
	var err error
	if m := c.RemoteSize(); len(sendbuf)%m != 0 || len(recvbuf)%m != 0 {
		err = errorf(ErrCount, name, "buffers of %d and %d elements for %d remote processes", len(sendbuf), len(recvbuf), m)
	} else if aliasing(elemBytes(sendbuf), elemBytes(recvbuf)) != disjoint {
		err = errorf(ErrBuffer, name, "send and receive buffers overlap (no in-place form on an intercommunicator)")
	}
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	return c.interRun(name, coll.InterAlltoall, a, err)
}

// interAllreduce: every process receives the reduction of the remote
// group's sendbufs, which have len(sendbuf) elements as this group's do.
func interAllreduce[T Element](c *Comm, sendbuf, recvbuf []T, op Op) error {
	cl, err := reductionCall("Allreduce", coll.Allreduce, sendbuf, recvbuf, op)
	return c.interRun("Allreduce", coll.InterAllreduce, cl.args, err)
}

// interAllgather: every process receives the remote group's sendbufs, in
// its rank order, at the start of recvbuf.
func interAllgather[T Element](c *Comm, sendbuf, recvbuf []T) error {
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	return c.interRun("Allgather", coll.InterAllgather, a, nil)
}
