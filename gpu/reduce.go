package gpu

import (
	"fmt"
	"os"
	"sync"

	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/gpu/kernels"
)

// reduceThreads is the block size of reduce launches: with 2048 resident
// threads per SM on sm_80 and sm_90, four such blocks fill an SM.
const reduceThreads = 512

// kernelSet is the reduce module loaded into one device's context.
type kernelSet struct {
	mod       *cuda.Module
	fns       map[[2]uint8]*cuda.Function // by (Op, DType)
	maxBlocks int                         // one wave of resident blocks
}

var (
	kernelMu   sync.Mutex
	kernelSets = map[cuda.Device]*kernelSet{}
)

// reducePTX returns the PTX to load: the embedded one, or GORUN_GPU_PTX's.
func reducePTX() ([]byte, string, error) {
	if path := getenv(envPTX, ""); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("gpu: %s: %w", envPTX, err)
		}
		return b, path, nil
	}
	return kernels.ReducePTX, "embedded reduce.ptx", nil
}

// kernelsFor loads the reduce kernels into c once (the driver JIT-compiles
// the PTX then: tens of milliseconds) and caches them for the process.
func kernelsFor(c *cuda.Context) (*kernelSet, error) {
	kernelMu.Lock()
	defer kernelMu.Unlock()
	if ks, ok := kernelSets[c.Device()]; ok {
		return ks, nil
	}
	ptx, src, err := reducePTX()
	if err != nil {
		return nil, err
	}
	mod, err := c.LoadModule(ptx)
	if err != nil {
		return nil, fmt.Errorf("gpu: load kernels (%s): %w", src, err)
	}
	ks := &kernelSet{mod: mod, fns: map[[2]uint8]*cuda.Function{}}
	for _, op := range Ops {
		for _, dt := range DTypes {
			f, err := mod.Function(kernels.ReduceName(op.String(), dt.kernelName()))
			if err != nil {
				_ = mod.Unload()
				return nil, fmt.Errorf("gpu: load kernels (%s): %w", src, err)
			}
			ks.fns[[2]uint8{uint8(op), uint8(dt)}] = f
		}
	}
	d := c.Device()
	sms, err := d.Attribute(cuda.AttrMultiprocessorCount)
	if err != nil {
		_ = mod.Unload()
		return nil, fmt.Errorf("gpu: load kernels: %w", err)
	}
	perSM, err := d.Attribute(cuda.AttrMaxThreadsPerMultiprocessor)
	if err != nil {
		_ = mod.Unload()
		return nil, fmt.Errorf("gpu: load kernels: %w", err)
	}
	ks.maxBlocks = max(1, sms*max(1, perSM/reduceThreads))
	kernelSets[d] = ks
	return ks, nil
}

// Reduce queues dst[i] = a[i] op b[i] for every element on stream s and
// returns without waiting. dst may be a or b (in place). The three buffers
// must have the same element type and length; they may live on any device
// that s's device can address (its own, or a peer's with peer access
// enabled: a kernel reading a peer's buffer over NVLink). When all three are
// 16-byte aligned, as Alloc's are, the kernel moves 16 bytes per access.
func Reduce(s *cuda.Stream, op Op, dst, a, b Buffer) error {
	if !op.Valid() {
		return fmt.Errorf("gpu: reduce: invalid op %v", op)
	}
	dt := dst.dt
	if !dt.Valid() || a.dt != dt || b.dt != dt {
		return fmt.Errorf("gpu: reduce %v: element types %v = %v %v %v differ or are invalid", op, dst.dt, a.dt, op, b.dt)
	}
	if a.bytes != dst.bytes || b.bytes != dst.bytes {
		return fmt.Errorf("gpu: reduce %v: lengths differ: dst %d, a %d, b %d bytes", op, dst.bytes, a.bytes, b.bytes)
	}
	n := dst.Count()
	if n == 0 {
		return nil
	}
	ks, err := kernelsFor(s.Context())
	if err != nil {
		return err
	}
	work := n
	if (dst.ptr|a.ptr|b.ptr)%kernels.ReduceVectorBytes == 0 {
		work = (n*dt.Size() + kernels.ReduceVectorBytes - 1) / kernels.ReduceVectorBytes
	}
	blocks := min(ks.maxBlocks, (work+reduceThreads-1)/reduceThreads)
	f := ks.fns[[2]uint8{uint8(op), uint8(dt)}]
	if err := s.Launch(f, cuda.D1(blocks), cuda.D1(reduceThreads), 0,
		dst.DevicePtr(), a.DevicePtr(), b.DevicePtr(), uint64(n)); err != nil {
		return fmt.Errorf("gpu: reduce %v %v: %w", op, dt, err)
	}
	return nil
}

// LoadKernels loads the reduce kernels into device dev now rather than at
// the first Reduce, so that the driver's JIT compile (tens of milliseconds)
// happens at start-up; it also reports a PTX that does not load.
func LoadKernels(dev int) error {
	c, err := DeviceContext(dev)
	if err != nil {
		return err
	}
	_, err = kernelsFor(c)
	return err
}
