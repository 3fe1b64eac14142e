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
	pBatch = params.Int("GORUN_CUDA_STAGE_BATCH", 64,
		"most staging copies (GPU memory over routes without GPU RMA) of up to GORUN_CUDA_STAGE_BATCH_MAX bytes issued together, behind one event, at the next progress, while their stream has a copy in flight; 1: each is issued at once with an event of its own")
	pBatchMax = params.Int("GORUN_CUDA_STAGE_BATCH_MAX", 1<<20,
		"largest staging copy that GORUN_CUDA_STAGE_BATCH lists for a batch; larger ones are issued at once (their launch is a small part of their time)")
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
// it; Progress reports it. A copy goes at once while its stream has none
// in flight (a message alone waits for no Progress);
// otherwise, up to GORUN_CUDA_STAGE_BATCH_MAX bytes, it is listed (queued),
// and the next Progress issues the listed copies together (issue): a
// window of sends, or of arrivals.
func (m *module) Stage(op *btl.StageOp) error {
	fail := func(err error) error { return m.stageErr(op, err) }
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
	if m.batchN > 1 && op.Dev.N <= m.batchMax && m.out[s] > 0 {
		// Only Progress issues listed copies: issued here, a failed one's
		// StageDone would run inside another operation's Stage.
		m.queued = append(m.queued, &copyOp{stage: op, s: s, dev: dev})
		return nil
	}
	if err := copyStage(s, op); err != nil {
		return fail(err)
	}
	if err := m.watch(s, &copyOp{stage: op}); err != nil {
		op.Owner.StageDone(op, fail(err))
	}
	return nil
}

func copyStage(s *drv.Stream, op *btl.StageOp) error {
	p := drv.DevicePtr(op.Dev.Ptr)
	if op.ToHost {
		return s.CopyDtoHAsync(op.Host, p)
	}
	return s.CopyHtoDAsync(p, op.Host)
}

// issue queues the listed copies on their streams, a stream's copies
// together, GORUN_CUDA_STAGE_BATCH at a time (with one cuMemcpyBatchAsync
// where the driver has it, else one by one) behind one event that they
// share. On the lent H100 hosts a small copy's launch costs the calling
// thread ~2.5 µs and its event as much again: windows of 64 copies of 8
// B-8 KiB went device to host at 1.2-1.6 M a second in one batch,
// 0.34-0.38 M one by one behind one event, 0.19-0.25 M with an event each
// (host to device in one batch: 1.6 M at 8 B, 0.4-0.6 M at 1-8 KiB;
// BenchmarkGPUStageSmall, medians). Staged osu bw of 1 B-16 KiB rose
// 1.5-3.4x, of 32 KiB-2 MiB over sm 1.1-2.1x
// (bench/results/gpu-stage-batch-2026-11-27.txt).
func (m *module) issue() {
	q, all := m.queued, m.queued
	m.queued = m.requeue[:0] // a failed copy's StageDone may stage again
	for len(q) > 0 {
		s, n := q[0].s, 0
		group := m.group[:0]
		for _, c := range q {
			if c.s == s {
				group = append(group, c)
			} else {
				q[n] = c
				n++
			}
		}
		for i := 0; i < len(group); i += m.batchN {
			m.issueOn(s, group[i:min(i+m.batchN, len(group))])
		}
		clear(group)
		m.group = group[:0]
		q = q[:n]
	}
	clear(all)
	m.requeue = all[:0]
}

// issueOn queues group's copies on s behind one event: with one
// cuMemcpyBatchAsync those between pinned host memory and device memory
// that lies in one allocation the driver knows (a copy through unified
// addresses reads an address no allocation holds as host memory, where
// cuMemcpyDtoHAsync refuses it), the others one by one. A batch the
// driver refuses is issued again copy by copy, so that only a copy it
// refuses itself fails (cuMemcpyBatchAsync_v2 does not say which one).
func (m *module) issueOn(s *drv.Stream, group []*copyOp) {
	batch := drv.BatchCopies() && len(group) > 1
	m.batch.Reset()
	var known [2]drv.DevicePtr // the device allocation checked last: base, end
	for _, c := range group {
		op := c.stage
		c.batched = batch && m.pinned[&op.Host[0]] != nil && m.deviceKnown(s, op.Dev, &known)
		switch {
		case !c.batched:
		case op.ToHost:
			m.batch.AddDtoH(op.Host, drv.DevicePtr(op.Dev.Ptr))
		default:
			m.batch.AddHtoD(drv.DevicePtr(op.Dev.Ptr), op.Host)
		}
	}
	refused := m.batch.Len() > 0 && s.CopyBatchAsync(&m.batch) != nil
	if !refused {
		m.batched += m.batch.Len()
	}
	// The others one by one, and the batch's too if the driver refused it.
	n := 0
	for _, c := range group {
		if !c.batched || refused {
			if err := copyStage(s, c.stage); err != nil {
				m.stageFailed(c, err)
				continue
			}
		}
		group[n] = c
		n++
	}
	if n == 0 {
		return
	}
	if err := m.watch(s, group[:n]...); err != nil {
		for _, c := range group[:n] {
			m.stageFailed(c, err)
		}
	}
}

// deviceKnown reports whether d lies in one device allocation, asking the
// driver unless it lies in known, the allocation it found last. A copy
// that is not known goes alone (copyStage), where the driver refuses an
// address that is not device memory.
func (m *module) deviceKnown(s *drv.Stream, d btl.Mem, known *[2]drv.DevicePtr) bool {
	p := drv.DevicePtr(d.Ptr)
	end := p + drv.DevicePtr(d.N)
	if p >= known[0] && end <= known[1] {
		return true
	}
	base, size, err := s.Context().AddressRange(p)
	if err != nil || end > base+drv.DevicePtr(size) {
		return false
	}
	known[0], known[1] = base, base+drv.DevicePtr(size)
	return true
}

// stageFailed reports a listed copy that was never issued, or whose issue
// failed.
func (m *module) stageFailed(c *copyOp, err error) {
	c.stage.Owner.StageDone(c.stage, m.stageErr(c.stage, err))
}

// stageErr is the error a staging copy reports for err (nil for nil).
func (m *module) stageErr(op *btl.StageOp, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cuda: rank %d: stage %v: %w", m.env.Rank, op.Dev, err)
}
