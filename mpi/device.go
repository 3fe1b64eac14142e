package mpi

import (
	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
)

// GPU memory in point-to-point calls. A gpu.Buffer (from gpu.Alloc, or
// gpu.Wrap around a CUDA pointer that another library allocated) goes
// wherever these functions take it; counts are in its elements. The rules
// on CUDA streams:
//
//   - before a send starts, the device must have finished writing the
//     buffer: synchronize the streams that wrote it (for PyTorch,
//     torch.cuda.current_stream().synchronize()); gorun copies on streams
//     of its own, which do not wait for yours;
//   - when a receive completes (Recv returns, or Wait on its request), its
//     data is in place and visible to every stream of the device;
//   - the buffer must stay allocated, and a send buffer unmodified, until
//     the request completes, as for slices.
//
// Between ranks of one host the bytes go GPU to GPU by the copy engines,
// through CUDA IPC (btl/cuda), over NVLink or PCIe. To another host, or to
// host memory, they go through pinned host memory in chunks (staging: the
// device-to-host copy of a chunk overlaps the sending of the previous one).
// Without a GPU transport (a binary built with CGO_ENABLED=0, a machine
// without a GPU, GORUN_BTL excluding cuda) the call fails with ErrBuffer on
// both sides and nothing moves.

// deviceMem describes b for the transports.
func deviceMem(b gpu.Buffer) btl.Mem { return btl.DeviceMem(b.Device(), b.Ptr(), b.Len()) }

// elemOf is the element size of the first of bufs with an element type
// (1 when none has one): for Status counts, and coll.Args.Elem of the GPU
// collectives (devcoll.go).
func elemOf(bufs ...gpu.Buffer) int {
	for _, b := range bufs {
		if n := b.DType().Size(); n > 0 {
			return n
		}
	}
	return 1
}

// SendGPU sends the device buffer b to rank dest of c with tag and returns
// once b may be reused.
func SendGPU(c *Comm, b gpu.Buffer, dest, tag int) error {
	r, err := startSend("SendGPU", c, deviceMem(b), dest, tag, false, nil)
	if err != nil {
		return err
	}
	_, err = finishRaw("SendGPU", c, r, 1)
	return err
}

// RecvGPU receives into the device buffer b from rank source of c (or
// AnySource) with tag (or AnyTag).
func RecvGPU(c *Comm, b gpu.Buffer, source, tag int) (Status, error) {
	r, err := startRecv("RecvGPU", c, deviceMem(b), source, tag, nil)
	if err != nil {
		return Status{}, err
	}
	return finishRaw("RecvGPU", c, r, elemOf(b))
}

// IsendGPU starts sending the device buffer b.
func IsendGPU(c *Comm, b gpu.Buffer, dest, tag int) (*Request, error) {
	return isendMem("IsendGPU", c, deviceMem(b), elemOf(b), dest, tag, false)
}

// IrecvGPU starts receiving into the device buffer b.
func IrecvGPU(c *Comm, b gpu.Buffer, source, tag int) (*Request, error) {
	return irecvMem("IrecvGPU", c, deviceMem(b), elemOf(b), source, tag)
}

// SendrecvGPU sends the device buffer sendbuf to dest and receives into the
// device buffer recvbuf from source at once (MPI_Sendrecv on device
// memory), so that exchanges in a ring cannot deadlock. The Status counts
// recvbuf's elements.
func SendrecvGPU(c *Comm, sendbuf gpu.Buffer, dest, sendtag int, recvbuf gpu.Buffer, source, recvtag int) (Status, error) {
	const name = "SendrecvGPU"
	if err := checkSendrecv(name, c, dest, sendtag); err != nil {
		return Status{}, err
	}
	return sendrecvMem(name, c, deviceMem(recvbuf), elemOf(recvbuf), source, recvtag, deviceMem(sendbuf), dest, sendtag)
}
