package osu

import (
	"fmt"
	"os"
	"strconv"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

// Buf is a benchmark's message buffer: host bytes, or with -d cuda GPU
// memory on the device of this rank (its local rank modulo the host's GPU
// count, as OSU's benchmarks pick one).
type Buf struct {
	host []byte
	dev  gpu.Buffer
	on   bool
}

// Buffer allocates n bytes where o says; it ends the program when -d cuda
// cannot be served.
func (o *Options) Buffer(n int) Buf {
	if !o.Device {
		return Buf{host: make([]byte, n)}
	}
	cnt, err := gpu.DeviceCount()
	if err != nil || cnt == 0 {
		Must(fmt.Errorf("-d cuda: no GPU here: %v", err))
	}
	local, _ := strconv.Atoi(os.Getenv("GORUN_LOCAL_RANK"))
	b, err := gpu.Alloc(local%cnt, gpu.Uint8, n)
	Must(err)
	Must(b.CopyFromHost(make([]byte, n)))
	return Buf{dev: b, on: true}
}

// Slice returns the first n bytes.
func (b Buf) Slice(n int) Buf {
	if b.on {
		return Buf{dev: b.dev.Slice(0, n), on: true}
	}
	return Buf{host: b.host[:n]}
}

// Send calls mpi.Send or mpi.SendGPU.
func Send(c *mpi.Comm, b Buf, dest, tag int) error {
	if b.on {
		return mpi.SendGPU(c, b.dev, dest, tag)
	}
	return mpi.Send(c, b.host, dest, tag)
}

// Recv calls mpi.Recv or mpi.RecvGPU.
func Recv(c *mpi.Comm, b Buf, src, tag int) error {
	var err error
	if b.on {
		_, err = mpi.RecvGPU(c, b.dev, src, tag)
	} else {
		_, err = mpi.Recv(c, b.host, src, tag)
	}
	return err
}

// Isend calls mpi.Isend or mpi.IsendGPU.
func Isend(c *mpi.Comm, b Buf, dest, tag int) (*mpi.Request, error) {
	if b.on {
		return mpi.IsendGPU(c, b.dev, dest, tag)
	}
	return mpi.Isend(c, b.host, dest, tag)
}

// Irecv calls mpi.Irecv or mpi.IrecvGPU.
func Irecv(c *mpi.Comm, b Buf, src, tag int) (*mpi.Request, error) {
	if b.on {
		return mpi.IrecvGPU(c, b.dev, src, tag)
	}
	return mpi.Irecv(c, b.host, src, tag)
}

// Float32 is the first n bytes of a device buffer as float32 elements
// (n/4 of them), for the reductions' -d cuda form.
func (b Buf) Float32(n int) gpu.Buffer {
	return gpu.Wrap(b.dev.Device(), b.dev.Ptr(), gpu.Float32, n/4)
}

// Dev is the first n bytes of a device buffer.
func (b Buf) Dev(n int) gpu.Buffer { return b.dev.Slice(0, n) }

// Float32s returns the reductions' host buffers: n bytes of float32 ones to
// send and as many to receive into.
func Float32s(n int) (send, recv []float32) {
	send, recv = make([]float32, n/4), make([]float32, n/4)
	for i := range send {
		send[i] = 1
	}
	return send, recv
}
