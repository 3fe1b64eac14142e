package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gorun/gorun/gpu/cuda"
)

// Buffer is a typed range of device memory: what the mpi API accepts
// wherever it accepts a slice, to send, receive or reduce GPU data.
//
// Like a slice it is a small value (device, address, length, element type)
// that may be copied and re-sliced freely; copies share the memory. A Buffer
// from Alloc or OpenIPC owns its memory until Free; one from Wrap borrows
// memory that someone else (PyTorch, CuPy, another library) allocated and
// frees. The zero Buffer is empty and valid.
type Buffer struct {
	mem   *allocation // nil for borrowed memory
	dev   int
	ptr   uintptr
	bytes int
	dt    DType
}

// allocation is the memory behind the Buffers sliced from one Alloc or
// OpenIPC.
type allocation struct {
	ctx    *cuda.Context
	base   cuda.DevicePtr // what cuMemFree or cuIpcCloseMemHandle takes
	start  uintptr        // first address of the Buffer Alloc or OpenIPC returned
	opened bool           // mapped from another process's IPC handle
	freed  atomic.Bool
}

// Alloc allocates count elements of type dt on CUDA device dev (not
// cleared). Free it with Free.
func Alloc(dev int, dt DType, count int) (Buffer, error) {
	if !dt.Valid() {
		return Buffer{}, fmt.Errorf("gpu: alloc: invalid element type %v", dt)
	}
	if count < 0 {
		return Buffer{}, fmt.Errorf("gpu: alloc: negative count %d", count)
	}
	c, err := DeviceContext(dev)
	if err != nil {
		return Buffer{}, fmt.Errorf("gpu: alloc on device %d: %w", dev, err)
	}
	if count == 0 {
		return Buffer{dev: dev, dt: dt}, nil
	}
	n := count * dt.Size()
	p, err := c.MemAlloc(n)
	if err != nil {
		return Buffer{}, fmt.Errorf("gpu: alloc: %w", err)
	}
	return Buffer{mem: &allocation{ctx: c, base: p, start: uintptr(p)}, dev: dev, ptr: uintptr(p), bytes: n, dt: dt}, nil
}

// Wrap describes device memory that the caller owns: count elements of dt at
// ptr on CUDA device dev. Free on the result is an error; the memory must
// outlive every use of the Buffer.
func Wrap(dev int, ptr uintptr, dt DType, count int) Buffer {
	return Buffer{dev: dev, ptr: ptr, bytes: count * dt.Size(), dt: dt}
}

// Device returns the CUDA device ordinal whose context the memory is used
// from: where it was allocated, or, for OpenIPC, where it was mapped.
func (b Buffer) Device() int { return b.dev }

// Ptr returns the device address of the first element.
func (b Buffer) Ptr() uintptr { return b.ptr }

// DevicePtr returns the address as the cuda package's type.
func (b Buffer) DevicePtr() cuda.DevicePtr { return cuda.DevicePtr(b.ptr) }

// Len returns the length in bytes.
func (b Buffer) Len() int { return b.bytes }

// Count returns the number of elements.
func (b Buffer) Count() int {
	if s := b.dt.Size(); s > 0 {
		return b.bytes / s
	}
	return 0
}

// DType returns the element type.
func (b Buffer) DType() DType { return b.dt }

// Slice returns elements [i, j) of b, sharing its memory. Like slicing, it
// panics when the range is out of bounds: that is a programming error.
func (b Buffer) Slice(i, j int) Buffer {
	if i < 0 || j < i || j > b.Count() {
		panic(fmt.Sprintf("gpu: Buffer.Slice(%d, %d) out of range [0, %d]", i, j, b.Count()))
	}
	s := b.dt.Size()
	return Buffer{mem: b.mem, dev: b.dev, ptr: b.ptr + uintptr(i*s), bytes: (j - i) * s, dt: b.dt}
}

// ErrNotOwned is returned by Free for a Buffer that does not own its memory:
// from Wrap, or a slice not starting at its allocation's base.
var ErrNotOwned = errors.New("gpu: buffer does not own its memory")

// Free releases memory from Alloc, or unmaps memory from OpenIPC. It must be
// called on the Buffer those returned (or a slice starting at its first
// element), once; a second Free returns an error, and every Buffer sliced
// from it becomes invalid.
func (b Buffer) Free() error {
	if b.mem == nil {
		if b.bytes == 0 {
			return nil
		}
		return ErrNotOwned
	}
	if b.mem.start != b.ptr {
		return ErrNotOwned
	}
	if b.mem.freed.Swap(true) {
		return fmt.Errorf("gpu: free %v: already freed", b)
	}
	// A free waits for the device's work, the resident kernel's too.
	defer HoldServer(b.dev)()
	if b.mem.opened {
		if err := b.mem.ctx.IPCCloseMemHandle(b.mem.base); err != nil {
			return fmt.Errorf("gpu: close IPC mapping %v: %w", b, err)
		}
		return nil
	}
	if err := b.mem.ctx.MemFree(b.mem.base); err != nil {
		return fmt.Errorf("gpu: free %v: %w", b, err)
	}
	return nil
}

// String describes the buffer: "gpu.Buffer{dev 1, 0x7f..., 1000 float32}".
func (b Buffer) String() string {
	return fmt.Sprintf("gpu.Buffer{dev %d, %#x, %d %v}", b.dev, b.ptr, b.Count(), b.dt)
}

// context returns the context the buffer is used from.
func (b Buffer) context() (*cuda.Context, error) {
	if b.mem != nil {
		return b.mem.ctx, nil
	}
	return DeviceContext(b.dev)
}

// CopyFromHost copies len(src) bytes from host memory into the start of b,
// synchronously.
func (b Buffer) CopyFromHost(src []byte) error {
	if len(src) > b.bytes {
		return fmt.Errorf("gpu: copy %d bytes into %v: too long", len(src), b)
	}
	c, err := b.context()
	if err != nil {
		return err
	}
	if err := c.CopyHtoD(b.DevicePtr(), src); err != nil {
		return fmt.Errorf("gpu: copy to %v: %w", b, err)
	}
	return nil
}

// CopyToHost copies len(dst) bytes from the start of b into host memory,
// synchronously.
func (b Buffer) CopyToHost(dst []byte) error {
	if len(dst) > b.bytes {
		return fmt.Errorf("gpu: copy %d bytes out of %v: too long", len(dst), b)
	}
	c, err := b.context()
	if err != nil {
		return err
	}
	if err := c.CopyDtoH(dst, b.DevicePtr()); err != nil {
		return fmt.Errorf("gpu: copy from %v: %w", b, err)
	}
	return nil
}

// Upload copies src into the start of dst, synchronously; dst's element size
// must match T's.
func Upload[T Element](dst Buffer, src []T) error {
	return dst.CopyFromHost(bytesOf(src, dst.dt))
}

// Download copies the start of src into dst, synchronously; src's element
// size must match T's.
func Download[T Element](dst []T, src Buffer) error {
	return src.CopyToHost(bytesOf(dst, src.dt))
}

// bytesOf views s as bytes. It panics when T's size differs from dt's: the
// caller mixed up types.
func bytesOf[T Element](s []T, dt DType) []byte {
	var z T
	if int(unsafe.Sizeof(z)) != dt.Size() {
		panic(fmt.Sprintf("gpu: %T elements for a %v buffer", z, dt))
	}
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}
