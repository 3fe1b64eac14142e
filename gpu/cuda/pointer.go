package cuda

import "fmt"

// MemoryType is where an address's memory lives (CUmemorytype).
type MemoryType int

// Memory types (cuda.h), plus MemoryUnknown for addresses CUDA does not know:
// ordinary pageable host memory.
const (
	MemoryUnknown MemoryType = 0
	MemoryHost    MemoryType = 1
	MemoryDevice  MemoryType = 2
	MemoryArray   MemoryType = 3
	MemoryUnified MemoryType = 4
)

// String names the memory type.
func (t MemoryType) String() string {
	switch t {
	case MemoryHost:
		return "host (pinned)"
	case MemoryDevice:
		return "device"
	case MemoryArray:
		return "array"
	case MemoryUnified:
		return "unified"
	default:
		return "unknown (pageable host)"
	}
}

// PointerInfo is what the driver knows about an address.
type PointerInfo struct {
	// Type is where the memory lives; MemoryUnknown for ordinary host memory.
	Type MemoryType
	// Device is the ordinal of the device the memory was allocated or
	// registered on; meaningful when Type is not MemoryUnknown.
	Device Device
	// Managed reports managed (cuMemAllocManaged) memory.
	Managed bool
}

// IsDevice reports whether the address is device memory (managed included).
func (i PointerInfo) IsDevice() bool { return i.Type == MemoryDevice || i.Managed }

// Pointer attributes (CUpointer_attribute, cuda.h).
const (
	attrMemoryType    = 2
	attrBufferID      = 7
	attrIsManaged     = 8
	attrDeviceOrdinal = 9
)

// QueryPointer asks the driver about address p (cuPointerGetAttribute): is
// it device memory, pinned host memory or neither, and of which device. An
// address CUDA does not know is not an error: it is MemoryUnknown.
func (c *Context) QueryPointer(p uintptr) (PointerInfo, error) {
	t, r := drvPointerGetAttribute(c.h, attrMemoryType, p)
	if r == ErrorInvalidValue {
		return PointerInfo{Type: MemoryUnknown}, nil
	}
	if err := check("cuPointerGetAttribute(MEMORY_TYPE)", r); err != nil {
		return PointerInfo{}, err
	}
	info := PointerInfo{Type: MemoryType(uint32(t))}
	d, r := drvPointerGetAttribute(c.h, attrDeviceOrdinal, p)
	if err := check("cuPointerGetAttribute(DEVICE_ORDINAL)", r); err != nil {
		return PointerInfo{}, err
	}
	info.Device = Device(int32(uint32(d)))
	m, r := drvPointerGetAttribute(c.h, attrIsManaged, p)
	if err := check("cuPointerGetAttribute(IS_MANAGED)", r); err != nil {
		return PointerInfo{}, err
	}
	info.Managed = uint32(m) != 0
	return info, nil
}

// BufferID returns the driver's id of the allocation that holds p
// (CU_POINTER_ATTRIBUTE_BUFFER_ID). The driver never gives two allocations
// of a process the same id, so an address freed and allocated again gets a
// new one: caches keyed by address add it to tell the two apart.
func (c *Context) BufferID(p DevicePtr) (uint64, error) {
	v, r := drvPointerGetAttribute(c.h, attrBufferID, uintptr(p))
	if err := check("cuPointerGetAttribute(BUFFER_ID)", r); err != nil {
		return 0, fmt.Errorf("device %d: %w", c.dev, err)
	}
	return v, nil
}
