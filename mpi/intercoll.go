package mpi

import "github.com/gorun/gorun/coll"

// The collectives of an intercommunicator (intercomm.go): Barrier, Bcast,
// Reduce, Allreduce, Gather(v), Scatter(v), Allgather(v), Alltoall(v),
// ReduceScatter and ReduceScatterBlock, blocking and nonblocking, send
// here; coll/inter.go and coll/interv.go run them. Each is prepared once
// (its arguments checked, an interCall) and then run by interRun (the
// blocking call) or started by interStart (the nonblocking one, which
// runs it in a goroutine as icollective.go does every nonblocking call).
// Scan and Exscan are not defined on an intercommunicator.

// interCall is a prepared intercommunicator collective: the operation's
// name, its call (the algorithm bound to the split of c's union) and, when
// the arguments were bad, why; the call then aborts at once, so that the
// other processes do not wait for this one.
type interCall struct {
	op  string
	cl  call
	err error
}

// interPrep binds fn to the split of the union of c's groups.
func (c *Comm) interPrep(op string, fn func(*coll.Comm, *coll.Args, int) error, a coll.Args, err error) interCall {
	split := c.inter.splitAt(len(c.world))
	return interCall{op: op, err: err, cl: call{fn: func(v *coll.Comm, a *coll.Args) error { return fn(v, a, split) }, args: a}}
}

// interRun runs the prepared call ic on the union of the intercommunicator
// c's groups as one blocking call.
func (c *Comm) interRun(ic interCall) error {
	v, err := c.interBegin(ic.op)
	if err != nil {
		return err
	}
	return finishCall(ic.op, &v, &ic.cl, ic.err)
}

// interStart starts the prepared call ic as a nonblocking collective on
// c; errors have been through c's handler.
func (c *Comm) interStart(ic interCall) (*Request, error) {
	v, err := c.interBegin(ic.op)
	if err != nil {
		return nil, c.fail(err)
	}
	q, err := start(c, ic.op, v, ic.cl, ic.err)
	return q, c.fail(err)
}

// unionRemote is the rank in the union of remote rank r.
func (c *Comm) unionRemote(r int) int {
	if c.inter.localFirst {
		return len(c.world) + r
	}
	return r
}

func interBarrier(name string, c *Comm) interCall {
	return c.interPrep(name, func(v *coll.Comm, a *coll.Args, _ int) error { return coll.InterBarrier(v, a) }, coll.Args{}, nil)
}

// interBcast: root is Root at the root, ProcNull at the other processes
// of its group, and the root's rank in the remote group in the other
// group.
func interBcast[T Element](name string, c *Comm, buf []T, root int) interCall {
	a := coll.Args{Recv: elemBytes(buf)}
	var err error
	a.Root, err = c.interRoot(name, root)
	return c.interPrep(name, coll.InterBcast, a, err)
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
func interReduce[T Element](name string, c *Comm, sendbuf, recvbuf []T, op Op, root int) interCall {
	r, err := c.interRoot(name, root)
	o, berr := bind[T](name, op)
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf), Op: o, Elem: elemSize[T](), Root: r}
	return c.interPrep(name, coll.InterReduce, a, firstErr(err, berr))
}

// interGather: the root (Root) receives the remote group's sendbufs, in
// its rank order, in recvbuf (RemoteSize blocks of the senders' length).
func interGather[T Element](name string, c *Comm, sendbuf, recvbuf []T, root int) interCall {
	return interRooted(c, name, coll.InterGather, sendbuf, recvbuf, recvbuf, "receive", root)
}

// interScatter: the root (Root) sends block j of sendbuf (RemoteSize
// blocks) to remote process j, which receives it in recvbuf.
func interScatter[T Element](name string, c *Comm, sendbuf, recvbuf []T, root int) interCall {
	return interRooted(c, name, coll.InterScatter, sendbuf, recvbuf, sendbuf, "send", root)
}

// interRooted prepares the intercommunicator Gather or Scatter, whose
// root's buffer rootBuf (its what buffer) holds one block per remote
// process.
func interRooted[T Element](c *Comm, name string, fn func(*coll.Comm, *coll.Args, int) error, sendbuf, recvbuf, rootBuf []T, what string, root int) interCall {
	r, err := c.interRoot(name, root)
	if err == nil && root == Root && len(rootBuf)%c.RemoteSize() != 0 {
		err = errorf(ErrCount, name, "%s buffer of %d elements for %d processes", what, len(rootBuf), c.RemoteSize())
	}
	return c.interPrep(name, fn, coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf), Root: r}, err)
}

// interAlltoall: every process sends block j of sendbuf to remote process
// j and receives that process's block in block j of recvbuf (both of
// RemoteSize blocks).
func interAlltoall[T Element](name string, c *Comm, sendbuf, recvbuf []T) interCall {
	var err error
	if m := c.RemoteSize(); len(sendbuf)%m != 0 || len(recvbuf)%m != 0 {
		err = errorf(ErrCount, name, "buffers of %d and %d elements for %d remote processes", len(sendbuf), len(recvbuf), m)
	} else {
		err = interDisjoint(name, sendbuf, recvbuf)
	}
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	return c.interPrep(name, coll.InterAlltoall, a, err)
}

// interDisjoint fails with ErrBuffer when the send and receive buffers of
// a collective without an in-place form on an intercommunicator overlap.
func interDisjoint[T Element](name string, sendbuf, recvbuf []T) error {
	if aliasing(elemBytes(sendbuf), elemBytes(recvbuf)) != disjoint {
		return errorf(ErrBuffer, name, "send and receive buffers overlap (no in-place form on an intercommunicator)")
	}
	return nil
}

// interAllreduce: every process receives the reduction of the remote
// group's sendbufs, which have len(sendbuf) elements as this group's do.
func interAllreduce[T Element](name string, c *Comm, sendbuf, recvbuf []T, op Op) interCall {
	var cl call
	err := reductionCall(name, coll.Allreduce, sendbuf, recvbuf, op, &cl)
	return c.interPrep(name, coll.InterAllreduce, cl.args, err)
}

// interAllgather: every process receives the remote group's sendbufs, in
// its rank order, at the start of recvbuf.
func interAllgather[T Element](name string, c *Comm, sendbuf, recvbuf []T) interCall {
	a := coll.Args{Send: elemBytes(sendbuf), Recv: elemBytes(recvbuf)}
	return c.interPrep(name, coll.InterAllgather, a, nil)
}
