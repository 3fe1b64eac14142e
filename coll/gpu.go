package coll

import (
	"fmt"
	"sync"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/internal/bufpool"
)

// GPU collectives: the same calls on device memory (Args.SendD, RecvD and
// DOp; gpualg.go has the algorithms). Bytes move through p2p's device path,
// which picks CUDA IPC and the copy engines between GPUs of one host and
// the pinned-host staging pipeline everywhere else (to another host, or to
// a GPU without a GPU transport between them), so every GPU collective runs
// wherever device point-to-point does. Reductions run on the GPU with
// package gpu's kernels, on a stream of this package's own per device.
//
// Streams: an algorithm makes sure the kernels that wrote data have passed
// before it sends the data (a peer's copy engine reads it on a stream of
// its own): it synchronizes its stream, or (the ring's pieces, gpuring.go)
// waits for an event recorded behind the kernel; and it synchronizes
// before it returns, so a call's result is in place for every stream of
// the device when it returns, as for point-to-point.

// devStreams holds one stream per device for the kernels and copies of GPU
// collectives; calls on one device share it (concurrent calls then
// serialize their kernels, which each wait for anyway).
var devStreams struct {
	sync.Mutex
	m map[int]*cuda.Stream
}

func devStream(dev int) (*cuda.Stream, error) {
	devStreams.Lock()
	defer devStreams.Unlock()
	if s, ok := devStreams.m[dev]; ok {
		return s, nil
	}
	s, err := gpu.NewStream(dev)
	if err != nil {
		return nil, err
	}
	if devStreams.m == nil {
		devStreams.m = map[int]*cuda.Stream{}
	}
	devStreams.m[dev] = s
	return s, nil
}

// devPool keeps device scratch buffers by device and power-of-two size
// class. They are never freed: peers keep their CUDA IPC mappings of them
// cached (btl/cuda), and cuMemAlloc costs far more than a pool lookup.
var devPool struct {
	sync.Mutex
	free map[[2]int][]gpu.Buffer
}

// getDev returns a scratch buffer of at least n bytes on device dev (bytes,
// content undefined); putDev gives it back.
func getDev(dev, n int) (gpu.Buffer, error) {
	k := bufpool.Class(max(n, 256))
	devPool.Lock()
	l := devPool.free[[2]int{dev, k}]
	if len(l) > 0 {
		b := l[len(l)-1]
		devPool.free[[2]int{dev, k}] = l[:len(l)-1]
		devPool.Unlock()
		return b, nil
	}
	devPool.Unlock()
	b, err := gpu.Alloc(dev, gpu.Uint8, 1<<k)
	if err != nil {
		return gpu.Buffer{}, fmt.Errorf("GPU collective: scratch of %d bytes: %w", n, err)
	}
	return b, nil
}

func putDev(b gpu.Buffer) {
	if b.Len() == 0 {
		return
	}
	devPool.Lock()
	defer devPool.Unlock()
	if devPool.free == nil {
		devPool.free = map[[2]int][]gpu.Buffer{}
	}
	k := [2]int{b.Device(), bufpool.Class(b.Len())}
	devPool.free[k] = append(devPool.free[k], b)
}

// typed views bytes [off, off+n) of b as elements of dt (n a multiple of
// dt's size): Reduce needs the element type, scratch has none.
func typed(b gpu.Buffer, dt gpu.DType, off, n int) gpu.Buffer {
	return gpu.Wrap(b.Device(), b.Ptr()+uintptr(off), dt, n/dt.Size())
}

// bytesOf views bytes [off, off+n) of b.
func bytesOf(b gpu.Buffer, off, n int) gpu.Buffer {
	return gpu.Wrap(b.Device(), b.Ptr()+uintptr(off), gpu.Uint8, n)
}

// devMem describes b for p2p; an empty range travels as an empty host
// message (every rank sees the same block sizes, so both sides agree).
func devMem(b gpu.Buffer) btl.Mem {
	if b.Len() == 0 {
		return btl.HostMem(nil)
	}
	return btl.DeviceMem(b.Device(), b.Ptr(), b.Len())
}

func (p *pending) sendD(c *Comm, b gpu.Buffer, dst int) error { return p.sendMem(c, devMem(b), dst) }

func (p *pending) recvD(c *Comm, b gpu.Buffer, src int) error { return p.recvMem(c, devMem(b), src) }

// devCall is what a GPU algorithm works with: the call's stream, element
// type and operation, and this rank's input (own: SendD, or RecvD in place).
type devCall struct {
	s   *cuda.Stream
	dev int
	dt  gpu.DType
	op  gpu.Op
	own gpu.Buffer
	rcv gpu.Buffer
	in  bool // in place
	// nb: a nonblocking call, which may run alongside other calls on its
	// communicator: it never uses the IPC regions (gpuipc.go), whose slots
	// calls take in turn.
	nb bool
	// phase: which push launch of the call runs next (0; 1 and 2 for the
	// later ones of gpuAllreduceTwoshot's), for its number
	// (ipcState.nextPush).
	phase int
	// scratch taken with take, and events taken with events, given back
	// by done.
	scratch []gpu.Buffer
	evs     []*cuda.Event
}

func newDevCall(a *Args) (*devCall, error) {
	d := &devCall{dev: a.RecvD.Device(), dt: a.RecvD.DType(), op: a.DOp, own: a.SendD, rcv: a.RecvD, nb: a.Nonblocking}
	if d.dt == 0 {
		d.dt = a.SendD.DType()
		d.dev = a.SendD.Device()
	}
	if a.SendD.Len() == 0 && a.SendD.DType() == 0 {
		d.own, d.in = a.RecvD, true
	}
	s, err := devStream(d.dev)
	if err != nil {
		return nil, err
	}
	d.s = s
	return d, nil
}

// take returns n bytes of scratch on the call's device.
func (d *devCall) take(n int) (gpu.Buffer, error) {
	b, err := getDev(d.dev, n)
	if err != nil {
		return gpu.Buffer{}, err
	}
	d.scratch = append(d.scratch, b)
	return bytesOf(b, 0, n), nil
}

// done gives the scratch back once the stream has passed every kernel
// that used it; every path out of an algorithm calls it with the
// algorithm's error. After a failure the scratch is not reused: receives
// into it may still be posted (p2p has no cancel), and a peer's copy could
// land in it later, so it is left to the process.
func (d *devCall) done(err error) {
	if len(d.scratch) == 0 && len(d.evs) == 0 {
		return
	}
	_ = d.s.Synchronize()
	d.putEvents()
	if err == nil {
		for _, b := range d.scratch {
			putDev(b)
		}
	}
	d.scratch = nil
}

// reduce queues dst = a op b (byte ranges of whole elements).
func (d *devCall) reduce(dst, a, b gpu.Buffer) error {
	n := dst.Len()
	return gpu.Reduce(d.s, d.op, typed(dst, d.dt, 0, n), typed(a, d.dt, 0, n), typed(b, d.dt, 0, n))
}

// copy queues dst = src on the call's stream.
func (d *devCall) copy(dst, src gpu.Buffer) error {
	if dst.Len() == 0 || dst.Ptr() == src.Ptr() {
		return nil
	}
	return d.s.CopyDtoDAsync(dst.DevicePtr(), src.DevicePtr(), dst.Len())
}

func (d *devCall) sync() error {
	if err := d.s.Synchronize(); err != nil {
		return fmt.Errorf("GPU collective: %w", err)
	}
	return nil
}
