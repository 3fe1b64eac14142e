package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Stream is a queue of device work (CUstream) in one context. Operations on
// one stream run in order; operations on different streams may overlap.
// Methods that end in Async only queue work: the memory they name must stay
// valid, and host memory unmoved and alive (runtime.KeepAlive), until the
// stream is synchronized or an event recorded after them has completed.
//
// A Stream is safe for concurrent use, though interleaving the work of
// several goroutines on one stream makes its order theirs to agree on.
type Stream struct {
	ctx       *Context
	h         uintptr
	destroyed atomic.Bool
}

// NewStream creates a stream that does not synchronize with the legacy
// default stream (CU_STREAM_NON_BLOCKING).
func (c *Context) NewStream() (*Stream, error) {
	h, r := drvStreamCreate(c.h, 1)
	if err := check("cuStreamCreate", r); err != nil {
		return nil, fmt.Errorf("device %d: %w", c.dev, err)
	}
	return &Stream{ctx: c, h: h}, nil
}

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.ctx }

// Handle returns the raw CUstream, for passing to other CUDA libraries.
func (s *Stream) Handle() uintptr { return s.h }

// Destroy releases the stream once its queued work is done. A second Destroy
// is a no-op.
func (s *Stream) Destroy() error {
	if s.destroyed.Swap(true) {
		return nil
	}
	return check("cuStreamDestroy_v2", drvStreamDestroy(s.ctx.h, s.h))
}

// Synchronize blocks until all work queued on the stream is done.
func (s *Stream) Synchronize() error {
	return check("cuStreamSynchronize", drvStreamSynchronize(s.ctx.h, s.h))
}

// Done reports, without blocking, whether all queued work is done.
func (s *Stream) Done() (bool, error) {
	r := drvStreamQuery(s.ctx.h, s.h)
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, check("cuStreamQuery", r)
}

// WaitEvent makes later work on s wait until e completes; e may belong to
// another context or, opened from an IPC handle, to another process.
func (s *Stream) WaitEvent(e *Event) error {
	return check("cuStreamWaitEvent", drvStreamWaitEvent(s.ctx.h, s.h, e.h))
}

// CopyAsync queues a copy of n bytes between any two addresses of the unified
// address space (cuMemcpyAsync). Between two devices it goes GPU to GPU when
// peer access is enabled from s's context, else the driver stages it.
func (s *Stream) CopyAsync(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpyAsync", drvMemcpyAsync(s.ctx.h, dst, src, uint64(n), s.h))
}

// CopyHtoDAsync queues a copy from host memory (pinned for a truly
// asynchronous copy; see the Stream comment on lifetimes) to the device.
func (s *Stream) CopyHtoDAsync(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoDAsync_v2", drvMemcpyHtoDAsync(s.ctx.h, dst, unsafe.Pointer(&src[0]), uint64(len(src)), s.h))
}

// CopyDtoHAsync queues a copy from the device to host memory.
func (s *Stream) CopyDtoHAsync(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoHAsync_v2", drvMemcpyDtoHAsync(s.ctx.h, unsafe.Pointer(&dst[0]), src, uint64(len(dst)), s.h))
}

// CopyBatch lists copies between device memory and host memory for
// Stream.CopyBatchAsync to queue with one driver call (cuMemcpyBatchAsync):
// each copy on its own costs the calling thread about 2.5 µs on an H100
// host. The copies of one batch may run in any order among themselves; the
// batch runs in the stream's order. Host memory must stay valid until the
// copies are done, as with CopyDtoHAsync: pinned memory (HostAlloc) for
// truly asynchronous copies; Go memory is kept reachable only until Reset.
type CopyBatch struct {
	dst, src, n []uint64
	// host keeps the host slices reachable until Reset: dst and src hold
	// their addresses as integers, which the garbage collector ignores.
	host [][]byte
}

// AddDtoH adds a copy from the device to host memory.
func (b *CopyBatch) AddDtoH(dst []byte, src DevicePtr) {
	if len(dst) > 0 {
		b.host = append(b.host, dst)
		b.add(uint64(uintptr(unsafe.Pointer(&dst[0]))), uint64(src), len(dst))
	}
}

// AddHtoD adds a copy from host memory to the device.
func (b *CopyBatch) AddHtoD(dst DevicePtr, src []byte) {
	if len(src) > 0 {
		b.host = append(b.host, src)
		b.add(uint64(dst), uint64(uintptr(unsafe.Pointer(&src[0]))), len(src))
	}
}

func (b *CopyBatch) add(dst, src uint64, n int) {
	b.dst = append(b.dst, dst)
	b.src = append(b.src, src)
	b.n = append(b.n, uint64(n))
}

// Len is the number of copies in b.
func (b *CopyBatch) Len() int { return len(b.n) }

// Reset empties b, keeping its memory.
func (b *CopyBatch) Reset() {
	clear(b.host)
	b.dst, b.src, b.n, b.host = b.dst[:0], b.src[:0], b.n[:0], b.host[:0]
}

// BatchCopies reports whether the driver queues a CopyBatch in one call
// (CUDA 13's cuMemcpyBatchAsync_v2); without it CopyBatchAsync fails with
// ErrorNotSupported and the copies are queued one by one.
func BatchCopies() bool { return driverLoaded() && drvHasMemcpyBatch() }

// CopyBatchAsync queues b's copies on s with one driver call. b may be
// reused as soon as it returns.
func (s *Stream) CopyBatchAsync(b *CopyBatch) error {
	if b.Len() == 0 {
		return nil
	}
	return check("cuMemcpyBatchAsync_v2", drvMemcpyBatchAsync(s.ctx.h, &b.dst[0], &b.src[0], &b.n[0], b.Len(), s.h))
}

// CopyDtoDAsync queues a copy between device buffers of the unified address
// space (cuMemcpyDtoDAsync_v2).
func (s *Stream) CopyDtoDAsync(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpyDtoDAsync_v2", drvMemcpyDtoDAsync(s.ctx.h, dst, src, uint64(n), s.h))
}

// CopyPeerAsync queues a copy from src in srcCtx's device to dst in dstCtx's
// device (cuMemcpyPeerAsync). It works whether or not peer access is
// enabled: without it the driver stages the copy through host memory.
func (s *Stream) CopyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpyPeerAsync", drvMemcpyPeerAsync(s.ctx.h, dst, dstCtx.h, src, srcCtx.h, uint64(n), s.h))
}

// MemsetAsync queues setting n bytes at p to v.
func (s *Stream) MemsetAsync(p DevicePtr, v byte, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemsetD8Async", drvMemsetD8Async(s.ctx.h, p, v, uint64(n), s.h))
}
