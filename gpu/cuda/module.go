package cuda

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
)

// Module is code loaded into a context (CUmodule): PTX, which the driver
// compiles for the device at load, or a cubin or fatbin.
type Module struct {
	ctx      *Context
	h        uintptr
	unloaded atomic.Bool
}

// LoadModule loads a module image (cuModuleLoadDataEx). For PTX the driver
// compiles it for this device now; a compile error comes back with the JIT's
// log in the error text.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: cuModuleLoadDataEx: empty image: %w", ErrorInvalidValue)
	}
	h, log, r := drvModuleLoadData(c.h, image)
	if err := check("cuModuleLoadDataEx", r); err != nil {
		if log = strings.TrimSpace(log); log != "" {
			return nil, fmt.Errorf("device %d: %w; JIT log: %s", c.dev, err, log)
		}
		return nil, fmt.Errorf("device %d: %w", c.dev, err)
	}
	return &Module{ctx: c, h: h}, nil
}

// Unload unloads the module; its functions become invalid. A second Unload
// is a no-op.
func (m *Module) Unload() error {
	if m.unloaded.Swap(true) {
		return nil
	}
	return check("cuModuleUnload", drvModuleUnload(m.ctx.h, m.h))
}

// Function is a kernel of a loaded module (CUfunction).
type Function struct {
	ctx  *Context
	h    uintptr
	name string
}

// Function looks a kernel up by its (extern "C", unmangled) name.
func (m *Module) Function(name string) (*Function, error) {
	h, r := drvModuleGetFunction(m.ctx.h, m.h, name)
	if err := check("cuModuleGetFunction", r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Function{ctx: m.ctx, h: h, name: name}, nil
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// BlocksPerSM returns how many blocks of block threads (and shared bytes
// of dynamic shared memory) of f one multiprocessor holds at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor): its registers, shared
// memory and threads allow.
func (f *Function) BlocksPerSM(block, shared int) (int, error) {
	n, r := drvOccupancy(f.ctx.h, f.h, block, shared)
	if err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor", r); err != nil {
		return 0, fmt.Errorf("%s: %w", f.name, err)
	}
	return n, nil
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional shape of n.
func D1(n int) Dim3 { return Dim3{X: uint32(n), Y: 1, Z: 1} }

// Launch queues kernel f on stream s (cuLaunchKernel) with the given grid,
// block and dynamic shared memory. Each argument must have the exact width
// of the kernel's parameter: DevicePtr, uintptr, int64, uint64 and float64
// for 8-byte parameters, int32, uint32 and float32 for 4-byte ones; plain
// int is refused as ambiguous. At most 16 arguments. LaunchArgs does the
// same without boxing the arguments (for launches on a latency path).
func (s *Stream) Launch(f *Function, grid, block Dim3, sharedBytes int, args ...any) error {
	ka := new(KernelArgs) // LaunchArgs refuses more than 16
	for i, a := range args {
		switch v := a.(type) {
		case DevicePtr:
			ka.U64(uint64(v))
		case uintptr:
			ka.U64(uint64(v))
		case int64:
			ka.U64(uint64(v))
		case uint64:
			ka.U64(v)
		case float64:
			ka.U64(math.Float64bits(v))
		case int32:
			ka.U32(uint32(v))
		case uint32:
			ka.U32(v)
		case float32:
			ka.U32(math.Float32bits(v))
		default:
			return fmt.Errorf("cuda: cuLaunchKernel: %s: argument %d has type %T: %w", f.name, i, a, ErrorInvalidValue)
		}
	}
	return s.LaunchArgs(f, grid, block, sharedBytes, ka)
}

// KernelArgs are a kernel's parameters, appended in order by U64 (8-byte
// parameters: pointers, 64-bit integers) and U32 (4-byte ones), each in an
// 8-byte slot. A KernelArgs held by its user and Reset before each launch
// costs no allocation (Launch's boxed arguments cost one each).
type KernelArgs struct {
	slots [maxKernelArgs]uint64
	n     int
}

// Reset empties a.
func (a *KernelArgs) Reset() { a.n = 0 }

// U64 appends an 8-byte parameter; past 16, LaunchArgs fails.
func (a *KernelArgs) U64(v uint64) {
	if a.n < maxKernelArgs {
		a.slots[a.n] = v
	}
	a.n++
}

// U32 appends a 4-byte parameter (in the low half of its slot: the host is
// little-endian).
func (a *KernelArgs) U32(v uint32) { a.U64(uint64(v)) }

// LaunchArgs queues kernel f on stream s with the parameters in a (see
// Launch); a may be reused once it returns.
func (s *Stream) LaunchArgs(f *Function, grid, block Dim3, sharedBytes int, a *KernelArgs) error {
	if a.n > maxKernelArgs {
		return fmt.Errorf("cuda: cuLaunchKernel: %s: %d arguments, at most %d: %w", f.name, a.n, maxKernelArgs, ErrorInvalidValue)
	}
	r := drvLaunchKernel(s.ctx.h, f.h, [3]uint32{grid.X, grid.Y, grid.Z}, [3]uint32{block.X, block.Y, block.Z},
		uint32(sharedBytes), s.h, &a.slots, a.n)
	if err := check("cuLaunchKernel", r); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	return nil
}
