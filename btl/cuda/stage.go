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
	pStagePool = params.Int("GORUN_CUDA_STAGE_BUFFERS", 16,
		"pinned host chunks a rank keeps for staging GPU memory (each GORUN_CUDA_STAGE_CHUNK bytes); beyond, staging uses pageable memory")
)

var _ btl.Stager = (*module)(nil)

// StageKinds: device memory.
func (m *module) StageKinds() btl.Kinds { return btl.KindsOf(btl.MemDevice) }

// StageChunk is GORUN_CUDA_STAGE_CHUNK.
func (m *module) StageChunk() int { return m.chunk }

// HostBuffer hands out a pinned chunk when n fits one and the pool allows,
// else plain memory.
func (m *module) HostBuffer(n int) []byte {
	if n <= m.chunk {
		if k := len(m.freeHost); k > 0 {
			h := m.freeHost[k-1]
			m.freeHost = m.freeHost[:k-1]
			return h.Bytes()[:n]
		}
		if len(m.pinned) < m.poolMax && !m.noPin {
			if h, err := m.pin(); err == nil {
				return h.Bytes()[:n]
			}
		}
	}
	return make([]byte, n)
}

// pin allocates one more pinned chunk (in device 0's context: the memory is
// portable to every context).
func (m *module) pin() (*drv.HostMem, error) {
	ctx, err := gpu.DeviceContext(0)
	if err == nil {
		var h *drv.HostMem
		if h, err = ctx.HostAlloc(m.chunk, 0); err == nil {
			m.pinned[&h.Bytes()[0]] = h
			return h, nil
		}
	}
	m.noPin = true // do not retry on every chunk
	return nil, err
}

// ReleaseHost puts a pinned chunk back in the pool; plain memory is left
// to the garbage collector.
func (m *module) ReleaseHost(b []byte) {
	if cap(b) == 0 {
		return
	}
	if h := m.pinned[&b[:1][0]]; h != nil {
		m.freeHost = append(m.freeHost, h)
	}
}

// Stage queues the copy on the device's copy stream with an event behind
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
	s, err := m.stream(int(op.Dev.Device))
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
	ev, err := m.event(s.Context())
	if err == nil {
		err = ev.Record(s)
	}
	if err != nil {
		serr := s.Synchronize()
		if serr != nil {
			err = fmt.Errorf("%w (and synchronize: %v)", err, serr)
		}
		op.Owner.StageDone(op, fail(err))
		return nil
	}
	m.pending = append(m.pending, &copyOp{stage: op, ev: ev})
	return nil
}
