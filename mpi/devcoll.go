package mpi

import (
	"github.com/gorun/gorun/coll"
	"github.com/gorun/gorun/gpu"
)

// GPU memory in collectives: the same calls on gpu.Buffers, counts in
// their elements, with the rules on CUDA streams of device.go (buffers
// written by the caller's streams must be synchronized before the call; the
// result is in place for every stream when the call returns). A send buffer
// and a receive buffer must be on one device and of one element type.
//
// In place: pass the zero gpu.Buffer (gpu.Buffer{}) as the send buffer
// (Allreduce, Reduce at the root, Allgather, ReduceScatterBlock, Gather at
// the root) or as the receive buffer (Scatter at the root), or the receive
// buffer itself as the send buffer.
//
// Reductions take Sum, Prod, Min and Max (package gpu's kernels: float32,
// float64, float16, bfloat16, int32, int64, uint8); any other Op fails with
// ErrOp. Every rank gets the same bits. Without a usable GPU the calls
// fail with ErrBuffer on every rank.
//
// Where each rank of a host has a GPU of its own, the collectives that run
// in one kernel (the "push" algorithms: small and medium buffers among the
// ranks of one host) are handed to a kernel that stays resident on the
// device between calls instead of a launch a call (3-4.5 µs less a call);
// it ends after GORUN_COLL_GPU_SERVE (100 µs) without a call. Until then it
// holds up to 128 blocks of the device (two an SM), and a synchronization
// of the whole device (cudaDeviceSynchronize, cudaFree) waits for it to
// end: that long after the program's last collective (its stream does not
// block the legacy default stream). gorun ends it first where it frees
// device memory itself. A kernel of the program's that fills the device in
// one wave and starts meanwhile runs some of its blocks in a second wave
// (on 2 H200, a compute-bound one of 45 µs took 54; a memory-bound one, or
// one of many waves, lost nothing measurable: coll/MEASUREMENTS.md). A
// launch of it whose blocks do not all start within 2 ms (other kernels
// holding SMs) takes no call: the calls are launched for a second, and
// until its late blocks have ended. It is used where the ranks of the
// host use a GPU each: each sees GPUs of its own (CUDA_VISIBLE_DEVICES set
// apart for each, as a scheduler's binding of GPUs to tasks does, and
// resolvable at Init: GPUs of one model or CUDA_DEVICE_ORDER=PCI_BUS_ID,
// no MIG instances), or the host has at least as many GPUs as ranks,
// taken to use one each (a communicator whose ranks share a device
// launches all the same); elsewhere the calls launch.
// GORUN_COLL_GPU_SERVE=0 launches a kernel a call everywhere.

// isZeroBuf reports whether b is the zero gpu.Buffer (in place).
func isZeroBuf(b gpu.Buffer) bool { return b.Len() == 0 && b.DType() == 0 && b.Ptr() == 0 }

// gpuOp maps op to a kernel operation.
func gpuOp(name string, op Op) (gpu.Op, error) {
	switch op.kind {
	case opSum:
		return gpu.Sum, nil
	case opProd:
		return gpu.Prod, nil
	case opMin:
		return gpu.Min, nil
	case opMax:
		return gpu.Max, nil
	case opNone:
		return 0, errorf(ErrOp, name, "the zero Op is not an operation (use Sum, Prod, Min or Max)")
	}
	return 0, errorf(ErrOp, name, "%s has no GPU kernel: GPU buffers take Sum, Prod, Min and Max", op)
}

// devOp checks a GPU reduction's operation (gpuOp) and buffers (checkDev).
func devOp(name string, op Op, bufs ...gpu.Buffer) (gpu.Op, error) {
	o, err := gpuOp(name, op)
	if err != nil {
		return 0, err
	}
	return o, checkDev(name, bufs...)
}

// checkDev checks a GPU call's buffers (zero ones are skipped): a GPU in
// this process, valid element types, one type and one device for all, and
// no partial overlap between two of them (the same range twice is in
// place).
func checkDev(name string, bufs ...gpu.Buffer) error {
	if ok, why := gpu.Available(); !ok {
		return errorf(ErrBuffer, name, "GPU buffers, but this process has no usable GPU: %s", why)
	}
	var first gpu.Buffer
	for _, b := range bufs {
		if isZeroBuf(b) {
			continue
		}
		if !b.DType().Valid() {
			return errorf(ErrType, name, "%v has no valid element type", b)
		}
		if isZeroBuf(first) {
			first = b
			continue
		}
		if b.DType() != first.DType() {
			return errorf(ErrType, name, "element types differ: %v and %v", first, b)
		}
		if b.Device() != first.Device() {
			return errorf(ErrBuffer, name, "buffers on different devices: %v and %v", first, b)
		}
		lo, hi := max(b.Ptr(), first.Ptr()), min(b.Ptr()+uintptr(b.Len()), first.Ptr()+uintptr(first.Len()))
		if lo < hi && (b.Ptr() != first.Ptr() || b.Len() != first.Len()) {
			return errorf(ErrBuffer, name, "send and receive buffers overlap: %v and %v", first, b)
		}
	}
	return nil
}

// inPlaceGPU reports whether send means "in place" for recv: the zero
// buffer, or recv's own range.
func inPlaceGPU(send, recv gpu.Buffer) bool {
	return isZeroBuf(send) || send.Ptr() == recv.Ptr() && send.Len() == recv.Len() && send.Device() == recv.Device()
}

// devPrep checks a GPU collective's arguments and returns them for coll.
type devPrep func() (coll.Args, error)

// devCollective runs a GPU collective: prep checks the arguments after the
// call has begun, so that a rank whose arguments are wrong aborts the call
// for every rank instead of leaving them waiting.
func devCollective(c *Comm, name string, fn func(*coll.Comm, *coll.Args) error, prep devPrep) error {
	v, err := c.begin(name)
	if err != nil {
		return err
	}
	var cl call
	a, err := prep()
	if err == nil {
		cl = call{fn: fn, args: a}
	}
	return finishCall(name, &v, &cl, err)
}

// idevCollective starts a GPU collective as a nonblocking call
// (icollective.go): wrong arguments fail here, and abort the call on the
// other ranks, as for devCollective.
func idevCollective(c *Comm, name string, fn func(*coll.Comm, *coll.Args) error, prep devPrep) (*Request, error) {
	v, err := c.begin(name)
	if err != nil {
		return nil, err
	}
	a, err := prep()
	return start(c, name, v, call{fn: fn, args: a}, err)
}

// blockCounts is n blocks of k elements of elem bytes, in bytes.
func blockCounts(n, k, elem int) []int {
	cs := make([]int, n)
	for i := range cs {
		cs[i] = k * elem
	}
	return cs
}

// AllreduceGPU combines every rank's sendbuf with op and leaves the result
// in every rank's recvbuf (MPI_Allreduce on device memory). The count is
// sendbuf's; in place, recvbuf's.
func AllreduceGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) error {
	return devCollective(c, "AllreduceGPU", coll.AllreduceGPU, allreduceGPU("AllreduceGPU", sendbuf, recvbuf, op))
}

func allreduceGPU(name string, sendbuf, recvbuf gpu.Buffer, op Op) devPrep {
	return func() (coll.Args, error) { return reductionGPU(name, sendbuf, recvbuf, op, coll.Args{}, true) }
}

// ReduceGPU combines every rank's sendbuf with op into the root's recvbuf
// (MPI_Reduce on device memory); recvbuf is read at the root only.
func ReduceGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op, root int) error {
	return devCollective(c, "ReduceGPU", coll.ReduceGPU, reduceGPU(c, "ReduceGPU", sendbuf, recvbuf, op, root))
}

func reduceGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer, op Op, root int) devPrep {
	return func() (coll.Args, error) {
		if err := c.checkRoot(name, root); err != nil {
			return coll.Args{}, err
		}
		return reductionGPU(name, sendbuf, recvbuf, op, coll.Args{Root: root}, c.Rank() == root)
	}
}

// reductionGPU prepares the a of AllreduceGPU, ReduceGPU, ScanGPU and
// ExscanGPU. Where the result
// lands here (result), the count is sendbuf's (in place, recvbuf's) and
// recvbuf must hold as many; elsewhere (a non-root's Reduce) recvbuf is
// not read.
func reductionGPU(name string, sendbuf, recvbuf gpu.Buffer, op Op, a coll.Args, result bool) (coll.Args, error) {
	o, err := gpuOp(name, op)
	if err != nil {
		return a, err
	}
	if !result {
		recvbuf = gpu.Buffer{}
	}
	if err := checkDev(name, sendbuf, recvbuf); err != nil {
		return a, err
	}
	a.DOp, a.Elem = o, elemOf(recvbuf, sendbuf)
	switch {
	case !result:
		a.SendD = sendbuf
	case inPlaceGPU(sendbuf, recvbuf):
		a.RecvD = recvbuf
	case recvbuf.Count() < sendbuf.Count():
		return a, errorf(ErrCount, name, "receive buffer of %d elements for %d", recvbuf.Count(), sendbuf.Count())
	default:
		a.SendD, a.RecvD = sendbuf, recvbuf.Slice(0, sendbuf.Count())
	}
	return a, nil
}

// BcastGPU copies the root's buf into every rank's buf (MPI_Bcast on
// device memory).
func BcastGPU(c *Comm, buf gpu.Buffer, root int) error {
	return devCollective(c, "BcastGPU", coll.BcastGPU, bcastGPU(c, "BcastGPU", buf, root))
}

func bcastGPU(c *Comm, name string, buf gpu.Buffer, root int) devPrep {
	return func() (coll.Args, error) {
		if err := c.checkRoot(name, root); err != nil {
			return coll.Args{}, err
		}
		return coll.Args{RecvD: buf, Root: root, Elem: elemOf(buf)}, checkDev(name, buf)
	}
}

// AllgatherGPU collects every rank's sendbuf into every rank's recvbuf,
// rank r's at element r*count (MPI_Allgather on device memory). In place,
// each rank's block is already at its place in recvbuf, whose length
// divided by the size is the count.
func AllgatherGPU(c *Comm, sendbuf, recvbuf gpu.Buffer) error {
	return devCollective(c, "AllgatherGPU", coll.AllgatherGPU, allgatherGPU(c, "AllgatherGPU", sendbuf, recvbuf))
}

func allgatherGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer) devPrep {
	return func() (coll.Args, error) {
		if err := checkDev(name, sendbuf, recvbuf); err != nil {
			return coll.Args{}, err
		}
		n, elem := c.Size(), elemOf(recvbuf, sendbuf)
		in := inPlaceGPU(sendbuf, recvbuf)
		k := sendbuf.Count()
		if in {
			k = recvbuf.Count() / n
		}
		if recvbuf.Count() < n*k {
			return coll.Args{}, errorf(ErrCount, name, "receive buffer of %d elements for %d ranks of %d", recvbuf.Count(), n, k)
		}
		a := coll.Args{RecvD: recvbuf.Slice(0, n*k), Elem: elem, Counts: blockCounts(n, k, elem)}
		if !in {
			a.SendD = sendbuf
		}
		return a, nil
	}
}

// ReduceScatterBlockGPU reduces every rank's sendbuf (size × count
// elements) with op and leaves block r of the result, count elements, in
// rank r's recvbuf (MPI_Reduce_scatter_block on device memory); count is
// recvbuf's length. In place, recvbuf holds the input (its length divided
// by the size is the count) and block r is left at its start.
func ReduceScatterBlockGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, op Op) error {
	return devCollective(c, "ReduceScatterBlockGPU", coll.ReduceScatterBlockGPU, reduceScatterBlockGPU(c, "ReduceScatterBlockGPU", sendbuf, recvbuf, op))
}

func reduceScatterBlockGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer, op Op) devPrep {
	return func() (coll.Args, error) {
		o, err := devOp(name, op, sendbuf, recvbuf)
		if err != nil {
			return coll.Args{}, err
		}
		n, elem := c.Size(), elemOf(recvbuf, sendbuf)
		a := coll.Args{DOp: o, Elem: elem}
		if inPlaceGPU(sendbuf, recvbuf) {
			k := recvbuf.Count() / n
			a.RecvD, a.Counts = recvbuf.Slice(0, n*k), blockCounts(n, k, elem)
			return a, nil
		}
		k := recvbuf.Count()
		if sendbuf.Count() < n*k {
			return a, errorf(ErrCount, name, "send buffer of %d elements for %d ranks of %d", sendbuf.Count(), n, k)
		}
		a.SendD, a.RecvD, a.Counts = sendbuf.Slice(0, n*k), recvbuf, blockCounts(n, k, elem)
		return a, nil
	}
}

// ReduceScatterGPU reduces every rank's sendbuf (the sum of recvcounts
// elements) with op and leaves block r of the result, recvcounts[r]
// elements after the blocks of the ranks before r, in rank r's recvbuf
// (MPI_Reduce_scatter on device memory). In place, recvbuf holds the input
// and block r is left at its start. It runs as an AllreduceGPU of the
// whole vector and a copy (about twice the traffic of a reduce-scatter;
// ReduceScatterBlockGPU has an algorithm of its own).
func ReduceScatterGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, recvcounts []int, op Op) error {
	return devCollective(c, "ReduceScatterGPU", coll.ReduceScatterGPU, reduceScatterGPU(c, "ReduceScatterGPU", sendbuf, recvbuf, recvcounts, op))
}

func reduceScatterGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer, recvcounts []int, op Op) devPrep {
	return func() (coll.Args, error) {
		o, err := devOp(name, op, sendbuf, recvbuf)
		if err != nil {
			return coll.Args{}, err
		}
		me, elem := c.Rank(), elemOf(recvbuf, sendbuf)
		counts, total, err := scatterCounts(name, c.Size(), recvcounts, elem)
		if err != nil {
			return coll.Args{}, err
		}
		a := coll.Args{DOp: o, Elem: elem, Counts: counts}
		if inPlaceGPU(sendbuf, recvbuf) {
			if recvbuf.Count() < total {
				return a, errorf(ErrCount, name, "in place: receive buffer of %d elements for an input of %d", recvbuf.Count(), total)
			}
			a.RecvD = recvbuf
			return a, nil
		}
		if sendbuf.Count() < total || recvbuf.Count() < recvcounts[me] {
			return a, errorf(ErrCount, name, "send buffer of %d elements for %d, receive buffer of %d for %d", sendbuf.Count(), total, recvbuf.Count(), recvcounts[me])
		}
		a.SendD, a.RecvD = sendbuf.Slice(0, total), recvbuf
		return a, nil
	}
}

// GatherGPU collects every rank's sendbuf into the root's recvbuf, rank r's
// at element r*count (MPI_Gather on device memory); recvbuf is read at the
// root only. In place at the root, its block is already in recvbuf, whose
// length divided by the size is the count.
func GatherGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, root int) error {
	return devCollective(c, "GatherGPU", coll.GatherGPU, rootedGPU(c, "GatherGPU", sendbuf, recvbuf, root, true))
}

// ScatterGPU sends block r (count elements) of the root's sendbuf to rank
// r's recvbuf (MPI_Scatter on device memory); sendbuf is read at the root
// only. The count is recvbuf's length; in place at the root (a zero
// recvbuf), sendbuf's divided by the size.
func ScatterGPU(c *Comm, sendbuf, recvbuf gpu.Buffer, root int) error {
	return devCollective(c, "ScatterGPU", coll.ScatterGPU, rootedGPU(c, "ScatterGPU", sendbuf, recvbuf, root, false))
}

// rootedGPU prepares GatherGPU (gather) or ScatterGPU.
func rootedGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer, root int, gather bool) devPrep {
	return func() (coll.Args, error) { return rootedArgs(c, name, sendbuf, recvbuf, root, gather) }
}

func rootedArgs(c *Comm, name string, sendbuf, recvbuf gpu.Buffer, root int, gather bool) (coll.Args, error) {
	if err := c.checkRoot(name, root); err != nil {
		return coll.Args{}, err
	}
	n := c.Size()
	// whole is the root's n blocks, one the block of every rank.
	whole, one := recvbuf, sendbuf
	if !gather {
		whole, one = sendbuf, recvbuf
	}
	if c.Rank() != root {
		whole = gpu.Buffer{}
	}
	if err := checkDev(name, whole, one); err != nil {
		return coll.Args{}, err
	}
	elem := elemOf(one, whole)
	k := one.Count()
	if c.Rank() == root && isZeroBuf(one) {
		k = whole.Count() / n
	}
	if c.Rank() == root && whole.Count() < n*k {
		return coll.Args{}, errorf(ErrCount, name, "the root's buffer of %d elements for %d ranks of %d", whole.Count(), n, k)
	}
	if c.Rank() == root {
		whole = whole.Slice(0, n*k)
	}
	a := coll.Args{Root: root, Elem: elem, Counts: blockCounts(n, k, elem)}
	if gather {
		a.SendD, a.RecvD = one, whole
	} else {
		a.SendD, a.RecvD = whole, one
	}
	return a, nil
}

// AlltoallGPU sends block r of every rank's sendbuf (its length divided by
// the size) to rank r, which puts it at block (sender) of its recvbuf
// (MPI_Alltoall on device memory). In place (the zero gpu.Buffer or recvbuf
// itself as sendbuf) recvbuf holds the blocks to send (its length divided
// by the size is the block) and receives in their place; the call then
// copies recvbuf to device scratch first.
func AlltoallGPU(c *Comm, sendbuf, recvbuf gpu.Buffer) error {
	return devCollective(c, "AlltoallGPU", coll.AlltoallGPU, alltoallGPU(c, "AlltoallGPU", sendbuf, recvbuf))
}

func alltoallGPU(c *Comm, name string, sendbuf, recvbuf gpu.Buffer) devPrep {
	return func() (coll.Args, error) {
		if err := checkDev(name, sendbuf, recvbuf); err != nil {
			return coll.Args{}, err
		}
		n, elem := c.Size(), elemOf(recvbuf, sendbuf)
		if inPlaceGPU(sendbuf, recvbuf) {
			k := recvbuf.Count() / n
			if recvbuf.Count() != n*k {
				return coll.Args{}, errorf(ErrCount, name, "in place: receive buffer of %d elements is not %d equal blocks", recvbuf.Count(), n)
			}
			return coll.Args{RecvD: recvbuf, Elem: elem, Counts: blockCounts(n, k, elem)}, nil
		}
		k := sendbuf.Count() / n
		if sendbuf.Count() != n*k {
			return coll.Args{}, errorf(ErrCount, name, "send buffer of %d elements is not %d equal blocks", sendbuf.Count(), n)
		}
		if recvbuf.Count() < n*k {
			return coll.Args{}, errorf(ErrCount, name, "receive buffer of %d elements for %d ranks of %d", recvbuf.Count(), n, k)
		}
		return coll.Args{SendD: sendbuf, RecvD: recvbuf.Slice(0, n*k), Elem: elem, Counts: blockCounts(n, k, elem)}, nil
	}
}
