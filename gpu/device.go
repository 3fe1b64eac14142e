package gpu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gorun/gorun/gpu/cuda"
)

// ErrNoGPU is wrapped by every error that means "this process has no usable
// GPU" (no driver, no device, built without cgo), as opposed to a GPU that
// failed. Test with errors.Is; the text after "no GPU: " says why.
var ErrNoGPU = errors.New("no GPU")

// noGPU wraps a cuda availability error as ErrNoGPU, keeping its reason.
func noGPU(err error) error {
	if cuda.IsNoGPU(err) {
		return fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	return err
}

// Available reports whether CUDA devices can be used in this process and,
// when not, the reason (e.g. "cuda: no usable CUDA driver: dlopen
// libcuda.so.1: libcuda.so.1: cannot open shared object file"). The answer
// is fixed for the process (the driver enumerates its devices once, at
// cuInit), so it is asked once: every GPU call of package mpi checks it.
func Available() (ok bool, reason string) { return available() }

var available = sync.OnceValues(cuda.Available)

// DeviceCount returns how many CUDA devices this process sees (0 with a
// reason wrapped in ErrNoGPU when none can be used).
func DeviceCount() (int, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return 0, noGPU(err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: %w", ErrNoGPU, cuda.ErrNoDevice)
	}
	return n, nil
}

var (
	ctxMu sync.Mutex
	ctxs  = map[int]*cuda.Context{}
)

// DeviceContext returns the primary context of CUDA device dev, retained on
// first use and kept for the life of the process; every Buffer, stream and
// kernel of this package on dev uses it.
func DeviceContext(dev int) (*cuda.Context, error) {
	ctxMu.Lock()
	defer ctxMu.Unlock()
	if c, ok := ctxs[dev]; ok {
		return c, nil
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if dev < 0 || dev >= n {
		return nil, fmt.Errorf("gpu: device %d: only %d devices", dev, n)
	}
	d, err := cuda.GetDevice(dev)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	c, err := cuda.PrimaryContext(d)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	ctxs[dev] = c
	return c, nil
}

// NewStream creates a stream on device dev's primary context that does not
// synchronize with the legacy default stream; the caller destroys it.
func NewStream(dev int) (*cuda.Stream, error) {
	c, err := DeviceContext(dev)
	if err != nil {
		return nil, err
	}
	s, err := c.NewStream()
	if err != nil {
		return nil, fmt.Errorf("gpu: stream: %w", err)
	}
	return s, nil
}

// EnablePeerAccess lets device dev use memory of device peer directly
// (kernels reading it, copies over NVLink or PCIe). It fails where the
// hardware cannot (Topology's Link.PeerAccess says in advance).
func EnablePeerAccess(dev, peer int) error {
	if dev == peer {
		return nil
	}
	c, err := DeviceContext(dev)
	if err != nil {
		return err
	}
	p, err := DeviceContext(peer)
	if err != nil {
		return err
	}
	if err := c.EnablePeerAccess(p); err != nil {
		return fmt.Errorf("gpu: enable peer access: %w", err)
	}
	return nil
}

// PointerInfo says whether address p is device memory and of which device:
// how the mpi layer tells a device address from a host one. Without a GPU
// every address is host memory.
func PointerInfo(p uintptr) (cuda.PointerInfo, error) {
	if ok, _ := Available(); !ok {
		return cuda.PointerInfo{Type: cuda.MemoryUnknown}, nil
	}
	c, err := DeviceContext(0)
	if err != nil {
		return cuda.PointerInfo{}, err
	}
	info, err := c.QueryPointer(p)
	if err != nil {
		return cuda.PointerInfo{}, fmt.Errorf("gpu: pointer %#x: %w", p, err)
	}
	return info, nil
}
