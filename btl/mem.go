package btl

import (
	"fmt"
	"unsafe"
)

// MemKind says what kind of memory a buffer is.
type MemKind uint8

const (
	// MemHost is ordinary process memory, reachable through a []byte.
	MemHost MemKind = iota
	// MemDevice is GPU memory (a CUDA device address); the CPU cannot
	// dereference it.
	MemDevice
	numMemKinds
)

func (k MemKind) String() string {
	switch k {
	case MemHost:
		return "host"
	case MemDevice:
		return "device"
	}
	return fmt.Sprintf("memkind(%d)", uint8(k))
}

// Kinds is a set of memory kinds: what an RMA capability can touch.
type Kinds uint8

// KindsOf makes a set of kinds.
func KindsOf(ks ...MemKind) Kinds {
	var s Kinds
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in the set.
func (s Kinds) Has(k MemKind) bool { return k < numMemKinds && s&(1<<k) != 0 }

// Mem describes a buffer below package mpi: what kind of memory it is,
// which device holds it, where it starts and how long it is. Package mpi
// makes it once per call; p2p and the transports pass it on. It is a small
// value, never allocated: host memory keeps its []byte, so the eager path
// hands the slice to the transport as before.
//
// Host memory: Kind is MemHost and Bytes holds the buffer (Ptr and N are
// unused). Device memory: Kind is MemDevice, Device the CUDA ordinal, Ptr
// the device address and N the length; Bytes is nil.
type Mem struct {
	Bytes  []byte
	Ptr    uintptr
	N      int
	Device int32
	Kind   MemKind
}

// HostMem describes a host buffer.
func HostMem(b []byte) Mem { return Mem{Bytes: b} }

// DeviceMem describes n bytes of device memory at ptr on CUDA device dev.
func DeviceMem(dev int, ptr uintptr, n int) Mem {
	return Mem{Kind: MemDevice, Device: int32(dev), Ptr: ptr, N: n}
}

// Len is the buffer's length in bytes.
func (m Mem) Len() int {
	if m.Kind == MemHost {
		return len(m.Bytes)
	}
	return m.N
}

// Addr is the address of the first byte: the host address of Bytes (0 for
// an empty host buffer) or the device address.
func (m Mem) Addr() uintptr {
	if m.Kind == MemHost {
		if len(m.Bytes) == 0 {
			return 0
		}
		return uintptr(unsafe.Pointer(&m.Bytes[0]))
	}
	return m.Ptr
}

// Slice returns bytes [from, to) of m. It panics out of range, as slicing
// does.
func (m Mem) Slice(from, to int) Mem {
	if m.Kind == MemHost {
		return Mem{Bytes: m.Bytes[from:to]}
	}
	if from < 0 || to < from || to > m.N {
		panic(fmt.Sprintf("btl: Mem.Slice(%d, %d) of %d device bytes", from, to, m.N))
	}
	return Mem{Kind: m.Kind, Device: m.Device, Ptr: m.Ptr + uintptr(from), N: to - from}
}

func (m Mem) String() string {
	if m.Kind == MemHost {
		return fmt.Sprintf("host[%d]", len(m.Bytes))
	}
	return fmt.Sprintf("%v%d[%#x+%d]", m.Kind, m.Device, m.Ptr, m.N)
}
