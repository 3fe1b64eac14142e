package mpi

import "github.com/gorun/gorun/coll"

// The collectives of an intercommunicator (intercomm.go): Barrier, Bcast,
// Allreduce and Allgather send here; coll/inter.go runs them.

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
	switch {
	case root == Root:
		a.Root = c.cc.Me
	case root == ProcNull:
		a.Root = -1
	case root >= 0 && root < c.RemoteSize():
		a.Root = c.unionRemote(root)
	default:
		err = errorf(ErrRoot, "Bcast", "root %d on intercommunicator %s: Root, ProcNull or a rank of the remote group (size %d)", root, c.name, c.RemoteSize())
	}
	return c.interRun("Bcast", coll.InterBcast, a, err)
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
