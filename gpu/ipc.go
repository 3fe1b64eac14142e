package gpu

import (
	"encoding/binary"
	"fmt"

	"github.com/gorun/gorun/gpu/cuda"
)

// IPCHandle lets another process on the same host map a Buffer: the CUDA IPC
// handle of the allocation holding it, plus where the Buffer sits inside it.
// Send it as bytes (MarshalBinary) over any channel; btl/cuda sends it in
// its rendezvous messages.
type IPCHandle struct {
	// Mem is the allocation's CUDA IPC handle.
	Mem cuda.IPCMemHandle
	// Offset is the Buffer's start from the allocation's base.
	Offset uint64
	// Bytes is the Buffer's length.
	Bytes uint64
	// DType is the Buffer's element type.
	DType DType
}

// IPCHandleSize is the length of IPCHandle's binary form (MarshalBinary).
const IPCHandleSize = 64 + 8 + 8 + 1

// ExportIPC returns the handle through which another process can map b. The
// memory must come from Alloc (or cudaMalloc/cuMemAlloc, through Wrap), and
// b's owner must keep it allocated while any other process has it mapped.
func (b Buffer) ExportIPC() (IPCHandle, error) {
	c, err := b.context()
	if err != nil {
		return IPCHandle{}, err
	}
	base, _, err := c.AddressRange(b.DevicePtr())
	if err != nil {
		return IPCHandle{}, fmt.Errorf("gpu: export %v: %w", b, err)
	}
	h, err := c.IPCGetMemHandle(base)
	if err != nil {
		return IPCHandle{}, fmt.Errorf("gpu: export %v: %w", b, err)
	}
	return IPCHandle{Mem: h, Offset: uint64(b.ptr) - uint64(base), Bytes: uint64(b.bytes), DType: b.dt}, nil
}

// OpenIPC maps another process's Buffer into this one, for use from CUDA
// device dev (which may be another GPU than the memory's: access then goes
// over NVLink or PCIe with peer access, enabled on first use). Free on the
// result unmaps it. A process may open a handle only once per device, and
// never its own.
func OpenIPC(dev int, h IPCHandle) (Buffer, error) {
	if !h.DType.Valid() {
		return Buffer{}, fmt.Errorf("gpu: open IPC handle: invalid element type %v", h.DType)
	}
	c, err := DeviceContext(dev)
	if err != nil {
		return Buffer{}, err
	}
	base, err := c.IPCOpenMemHandle(h.Mem)
	if err != nil {
		return Buffer{}, fmt.Errorf("gpu: open IPC handle on device %d: %w", dev, err)
	}
	start := uintptr(base) + uintptr(h.Offset)
	mem := &allocation{ctx: c, base: base, start: start, opened: true}
	return Buffer{mem: mem, dev: dev, ptr: start, bytes: int(h.Bytes), dt: h.DType}, nil
}

// MarshalBinary encodes the handle as 81 bytes.
func (h IPCHandle) MarshalBinary() ([]byte, error) {
	b := make([]byte, IPCHandleSize)
	copy(b, h.Mem[:])
	binary.LittleEndian.PutUint64(b[64:], h.Offset)
	binary.LittleEndian.PutUint64(b[72:], h.Bytes)
	b[80] = byte(h.DType)
	return b, nil
}

// UnmarshalBinary decodes MarshalBinary's form.
func (h *IPCHandle) UnmarshalBinary(b []byte) error {
	if len(b) != IPCHandleSize {
		return fmt.Errorf("gpu: IPC handle: %d bytes, want %d", len(b), IPCHandleSize)
	}
	copy(h.Mem[:], b)
	h.Offset = binary.LittleEndian.Uint64(b[64:])
	h.Bytes = binary.LittleEndian.Uint64(b[72:])
	h.DType = DType(b[80])
	if !h.DType.Valid() {
		return fmt.Errorf("gpu: IPC handle: invalid element type %d", b[80])
	}
	return nil
}
