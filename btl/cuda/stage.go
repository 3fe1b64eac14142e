package cuda

import (
	"fmt"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
	drv "github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/internal/params"
)

var (
	pStageChunk = params.Int("GORUN_CUDA_STAGE_CHUNK", 4<<20,
		"bytes per chunk of the pipeline that moves GPU memory through pinned host memory over routes without GPU RMA (another host)")
	pStagePool = params.Int("GORUN_CUDA_STAGE_POOL", 128<<20,
		"most bytes of pinned host memory a rank keeps for staging GPU memory (buffers of 64 KiB to GORUN_CUDA_STAGE_CHUNK, by powers of two); beyond, staging uses pageable memory")
)

var _ btl.Stager = (*module)(nil)

// StageKinds: device memory.
func (m *module) StageKinds() btl.Kinds { return btl.KindsOf(btl.MemDevice) }

// StageChunk is GORUN_CUDA_STAGE_CHUNK.
func (m *module) StageChunk() int { return m.chunk }

// minPinned is the smallest pinned buffer: below it a message's staging is
// dominated by the copy's launch, not its size.
const minPinned = 64 << 10

// pinClass is the pinned buffer size that serves n bytes: a power of two
// from minPinned up.
func pinClass(n int) int {
	c := minPinned
	for c < n {
		c *= 2
	}
	return c
}

// HostBuffer hands out pinned memory from the pool (by power-of-two size
// class). When the pool's bytes are spent it frees idle buffers of other
// sizes to make room; when they are all in use it returns nil (one will
// come back); when none is in use (nothing will come back: a chunk larger
// than the pool, or pinning failed) it returns plain memory, so that a
// sender never waits for nothing.
func (m *module) HostBuffer(dev, n int) []byte {
	if n <= m.chunk && !m.noPin {
		c := pinClass(n)
		if f := m.freeHost[c]; len(f) > 0 {
			h := f[len(f)-1]
			m.freeHost[c] = f[:len(f)-1]
			m.freeBytes -= c
			return h.Bytes()[:n]
		}
		if m.pinnedBytes+c > m.poolMax {
			m.evictPinned(c)
		}
		if m.pinnedBytes+c <= m.poolMax {
			if h, err := m.pin(dev, c); err == nil {
				return h.Bytes()[:n]
			}
		}
		if m.pinnedBytes > m.freeBytes {
			return nil
		}
	}
	return make([]byte, n)
}

// evictPinned frees idle pinned buffers until c more bytes fit in the pool, or
// none is idle.
func (m *module) evictPinned(c int) {
	for size, f := range m.freeHost {
		for len(f) > 0 && m.pinnedBytes+c > m.poolMax {
			h := f[len(f)-1]
			f = f[:len(f)-1]
			delete(m.pinned, &h.Bytes()[0])
			h.Free()
			m.pinnedBytes -= size
			m.freeBytes -= size
		}
		m.freeHost[size] = f
		if m.pinnedBytes+c <= m.poolMax {
			return
		}
	}
}

// pin allocates a pinned buffer of c bytes in device dev's context (the
// memory is portable to every context, but making a context on another
// device would cost this rank hundreds of MiB there).
func (m *module) pin(dev, c int) (*drv.HostMem, error) {
	ctx, err := gpu.DeviceContext(dev)
	if err == nil {
		var h *drv.HostMem
		if h, err = ctx.HostAlloc(c, 0); err == nil {
			m.pinned[&h.Bytes()[0]] = h
			m.pinnedBytes += c
			return h, nil
		}
	}
	m.noPin = true // do not retry on every chunk
	return nil, err
}

// ReleaseHost puts a pinned buffer back in the pool; plain memory is left
// to the garbage collector.
func (m *module) ReleaseHost(b []byte) {
	if cap(b) == 0 {
		return
	}
	if h := m.pinned[&b[:1][0]]; h != nil {
		m.freeHost[h.Len()] = append(m.freeHost[h.Len()], h)
		m.freeBytes += h.Len()
	}
}

// Stage queues the copy on the device's copy stream (an eager message's on
// the eager stream, kept among the copy streams under the key ^dev, so
// that it does not wait behind the pipeline's chunks) with an event behind
// it; Progress reports it.
func (m *module) Stage(op *btl.StageOp) error {
	fail := func(err error) error {
		return fmt.Errorf("cuda: rank %d: stage %v: %w", m.env.Rank, op.Dev, err)
	}
	if m.closed {
		return fail(btl.ErrClosed)
	}
	if op.Dev.Kind != btl.MemDevice || len(op.Host) != op.Dev.N {
		return fail(fmt.Errorf("want device memory and a host buffer of its length (%d bytes)", len(op.Host)))
	}
	if op.Dev.N == 0 {
		op.Owner.StageDone(op, nil)
		return nil
	}
	dev := int(op.Dev.Device)
	key := dev
	if op.Eager {
		key = ^dev // negative: the copy streams' keys are devices
	}
	s, err := m.streamAt(key, dev)
	if err != nil {
		return fail(err)
	}
	p := drv.DevicePtr(op.Dev.Ptr)
	if op.ToHost {
		err = s.CopyDtoHAsync(op.Host, p)
	} else {
		err = s.CopyHtoDAsync(p, op.Host)
	}
	if err != nil {
		return fail(err)
	}
	if err := m.watch(s, &copyOp{stage: op}); err != nil {
		op.Owner.StageDone(op, fail(err))
	}
	return nil
}
