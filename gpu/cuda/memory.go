package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr). With unified addressing, the
// rule on every 64-bit Linux system, device and pinned host addresses share
// one address space, so a DevicePtr also names pinned host memory.
type DevicePtr uint64

// MemAlloc allocates n bytes of device memory (cuMemAlloc_v2), aligned to at
// least 256 bytes. The memory is not cleared. Free it with MemFree.
func (c *Context) MemAlloc(n int) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: cuMemAlloc_v2: device %d: size %d: %w", c.dev, n, ErrorInvalidValue)
	}
	p, r := drvMemAlloc(c.h, uint64(n))
	if err := check("cuMemAlloc_v2", r); err != nil {
		return 0, fmt.Errorf("device %d: %d bytes: %w", c.dev, n, err)
	}
	return p, nil
}

// MemFree frees memory from MemAlloc. It waits for work still using it.
func (c *Context) MemFree(p DevicePtr) error {
	return check("cuMemFree_v2", drvMemFree(c.h, p))
}

// AddressRange returns the allocation that holds p: its base and size
// (cuMemGetAddressRange_v2). IPC handles name whole allocations, so a
// sub-range is exported as (handle of base, p-base).
func (c *Context) AddressRange(p DevicePtr) (base DevicePtr, size uint64, err error) {
	b, s, r := drvMemGetAddressRange(c.h, p)
	return b, s, check("cuMemGetAddressRange_v2", r)
}

// Memcpy copies n bytes between any two addresses of the unified address
// space (device, peer device or pinned host), synchronously (cuMemcpy).
func (c *Context) Memcpy(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpy", drvMemcpy(c.h, dst, src, uint64(n)))
}

// CopyHtoD copies len(src) bytes from host memory to device memory and
// returns when done (cuMemcpyHtoD_v2, then a synchronize of the default
// stream: from pageable memory cuMemcpyHtoD returns once the bytes are in
// the driver's staging buffer, before the DMA to the device has finished,
// so work on another stream, such as gorun's own copy streams, could read
// the old bytes; seen with 4 KiB copies on an H200).
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := check("cuMemcpyHtoD_v2", drvMemcpyHtoD(c.h, dst, unsafe.Pointer(&src[0]), uint64(len(src)))); err != nil {
		return err
	}
	return check("cuStreamSynchronize", drvStreamSynchronize(c.h, 0))
}

// CopyDtoH copies len(dst) bytes from device memory to host memory and
// returns when done (cuMemcpyDtoH_v2).
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoH_v2", drvMemcpyDtoH(c.h, unsafe.Pointer(&dst[0]), src, uint64(len(dst))))
}

// CopyDtoD copies n bytes between device buffers and returns when done
// (cuMemcpyDtoD_v2).
func (c *Context) CopyDtoD(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpyDtoD_v2", drvMemcpyDtoD(c.h, dst, src, uint64(n)))
}

// Memset sets n bytes at p to v and returns when done.
func (c *Context) Memset(p DevicePtr, v byte, n int) error {
	if n == 0 {
		return nil
	}
	if err := check("cuMemsetD8Async", drvMemsetD8Async(c.h, p, v, uint64(n), 0)); err != nil {
		return err
	}
	return check("cuStreamSynchronize", drvStreamSynchronize(c.h, 0))
}

// HostMemFlags select cuMemHostAlloc's options.
type HostMemFlags uint32

// cuMemHostAlloc flags (cuda.h).
const (
	// HostPortable makes the memory pinned for every context, not only c's.
	HostPortable HostMemFlags = 0x1
	// HostDeviceMap maps the memory into the device address space.
	HostDeviceMap HostMemFlags = 0x2
	// HostWriteCombined allocates write-combined memory: fast for the host to
	// write and the device to read, slow for the host to read.
	HostWriteCombined HostMemFlags = 0x4
)

// HostMem is page-locked (pinned) host memory from cuMemHostAlloc: copies
// between it and a device run at full PCIe speed and may be asynchronous.
type HostMem struct {
	ctx   *Context
	p     unsafe.Pointer
	n     int
	freed atomic.Bool
}

// HostAlloc allocates n bytes of pinned host memory, portable to every
// context. Free it with Free.
func (c *Context) HostAlloc(n int, flags HostMemFlags) (*HostMem, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: cuMemHostAlloc: size %d: %w", n, ErrorInvalidValue)
	}
	p, r := drvMemHostAlloc(c.h, uint64(n), uint32(flags|HostPortable))
	if err := check("cuMemHostAlloc", r); err != nil {
		return nil, fmt.Errorf("%d bytes: %w", n, err)
	}
	return &HostMem{ctx: c, p: p, n: n}, nil
}

// Bytes returns the memory as a byte slice, valid until Free.
func (h *HostMem) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Ptr returns the memory's address in the unified address space.
func (h *HostMem) Ptr() DevicePtr { return DevicePtr(uintptr(h.p)) }

// Len returns the size in bytes.
func (h *HostMem) Len() int { return h.n }

// Free releases the memory. A second Free is a no-op.
func (h *HostMem) Free() error {
	if h.freed.Swap(true) {
		return nil
	}
	return check("cuMemFreeHost", drvMemFreeHost(h.ctx.h, h.p))
}
