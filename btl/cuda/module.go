package cuda

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
	drv "github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/internal/params"
)

func init() { btl.Register("cuda", component{}) }

var (
	pIPCCache = params.Int("GORUN_CUDA_IPC_CACHE", 64,
		"most peer GPU allocations a rank keeps mapped through CUDA IPC (opening one costs ~100 µs); the oldest unused is unmapped beyond")
	pIPCExportCache = params.Int("GORUN_CUDA_IPC_EXPORT_CACHE", 256,
		"most of this rank's GPU allocations whose CUDA IPC handle it keeps (cuIpcGetMemHandle costs ~20 µs a rendezvous otherwise; 0: no cache); the least recently used is forgotten beyond")
	pIPC = params.String("GORUN_CUDA_IPC", "on",
		`"none" turns CUDA IPC between ranks of a host off: GPU memory then goes through pinned host memory (staging), as between hosts`)
)

type component struct{}

// address is what the module publishes: a marker that it is open.
var address = []byte("ipc")

// Open is cheap: it does not initialise CUDA (cuInit costs tens of
// milliseconds, which every launch would pay on a GPU host whether or not
// the program uses device memory). It opens where the binary can reach the
// driver (cgo) and the NVIDIA driver has GPUs; CUDA starts at the first
// Register or Get, by which time the program has allocated device memory
// and started CUDA itself.
func (component) Open(env btl.Env) (btl.Module, error) {
	if !drv.CgoEnabled() {
		return nil, fmt.Errorf("cuda: rank %d: built without cgo (CGO_ENABLED=0): GPU support is off", env.Rank)
	}
	if gpus, _ := filepath.Glob("/proc/driver/nvidia/gpus/*"); len(gpus) == 0 {
		return nil, fmt.Errorf("cuda: rank %d: no NVIDIA GPU (/proc/driver/nvidia/gpus is empty or missing)", env.Rank)
	}
	limit := pIPCCache()
	if limit < 1 {
		return nil, fmt.Errorf("cuda: rank %d: GORUN_CUDA_IPC_CACHE=%d: want at least 1", env.Rank, limit)
	}
	exportLimit := pIPCExportCache()
	if exportLimit < 0 {
		return nil, fmt.Errorf("cuda: rank %d: GORUN_CUDA_IPC_EXPORT_CACHE=%d: want at least 0", env.Rank, exportLimit)
	}
	chunk, pool := pStageChunk(), pStagePool()
	if chunk < 4096 || pool < 0 {
		return nil, fmt.Errorf("cuda: rank %d: GORUN_CUDA_STAGE_CHUNK=%d, GORUN_CUDA_STAGE_POOL=%d: want at least 4096 and 0", env.Rank, chunk, pool)
	}
	batchN, batchMax := pBatch(), pBatchMax()
	if batchN < 1 || batchMax < 0 {
		return nil, fmt.Errorf("cuda: rank %d: GORUN_CUDA_STAGE_BATCH=%d, GORUN_CUDA_STAGE_BATCH_MAX=%d: want at least 1 and 0", env.Rank, batchN, batchMax)
	}
	return &module{env: env, streams: map[int]*drv.Stream{}, own: map[drv.IPCMemHandle]*export{},
		maps: map[mapKey]*mapping{}, limit: limit, ipc: pIPC() != "none", exports: exportCache{limit: exportLimit},
		chunk: chunk, poolMax: pool, batchN: batchN, batchMax: batchMax, out: map[*drv.Stream]int{}, pinned: map[*byte]*drv.HostMem{}, freeHost: map[int][]*drv.HostMem{}}, nil
}

// module is one rank's GPU transport.
type module struct {
	env     btl.Env
	streams map[int]*drv.Stream // the copy stream of each device used
	// own are this rank's exported allocations, by handle, for regions
	// from this rank itself.
	own map[drv.IPCMemHandle]*export
	// exports caches the IPC handles of this rank's allocations (export.go).
	exports exportCache
	// maps are peers' allocations mapped here, by device and handle.
	maps  map[mapKey]*mapping
	clock uint64 // use counter for the cache's age order
	limit int
	// ipc: CUDA IPC between ranks of a host (GORUN_CUDA_IPC).
	ipc bool
	// pending copies, in issue order; free events for reuse.
	pending []*copyOp
	spare   []*copyOp // the other list Progress alternates with
	// queued are staging copies listed by Stage, not yet issued (stage.go,
	// issue); requeue and group are issue's spare lists, batch its copies.
	queued  []*copyOp
	requeue []*copyOp
	group   []*copyOp
	batch   drv.CopyBatch
	batched int // copies issued in batches, for tests
	// out counts each stream's copies issued and not yet finished: Stage
	// issues a staging copy at once on a stream with none (a message alone
	// waits for no Progress), and lists it for the next batch otherwise.
	// Copies are listed only behind copies in flight, which finish no
	// sooner than the Progress that issues the list.
	out      map[*drv.Stream]int
	batchN   int // GORUN_CUDA_STAGE_BATCH
	batchMax int // GORUN_CUDA_STAGE_BATCH_MAX
	free     []*drv.Event
	closed   bool
	// Staging (stage.go): chunk size, the pinned buffers by first byte,
	// those free by size, their bytes and the pool's bound.
	chunk       int
	pinned      map[*byte]*drv.HostMem
	freeHost    map[int][]*drv.HostMem
	pinnedBytes int
	freeBytes   int // of pinnedBytes, those idle in freeHost
	poolMax     int
	noPin       bool
}

type export struct {
	base drv.DevicePtr
	size uint64
	refs int
}

type mapKey struct {
	dev int
	h   drv.IPCMemHandle
}

type mapping struct {
	ctx  *drv.Context
	peer int // whose allocation it is
	base drv.DevicePtr
	size uint64 // of the mapped allocation: regions are checked against it
	used uint64 // clock at last use
	busy int    // pending copies that use it
}

// copyOp is a queued copy: an RMA operation, or a staging copy (stage).
type copyOp struct {
	op    *btl.RMAOp
	stage *btl.StageOp
	ev    *drv.Event // shared by the copies issued together (stage.go, issue)
	owner bool       // the last of those: its finish gives ev back
	// batched: issued in a cuMemcpyBatchAsync (issueOn)
	batched bool
	s       *drv.Stream // the stream the copy was queued on
	m       *mapping    // nil for a copy within this process
	dev     int
}

var (
	_ btl.Module = (*module)(nil)
	_ btl.RMA    = (*module)(nil)
)

func (m *module) Name() string    { return "cuda" }
func (m *module) Address() []byte { return address }

// Caps: the module carries no frames; the caps are never used for them.
func (m *module) Caps() btl.Caps { return btl.Caps{Exclusivity: 0} }

// Reach reaches nobody: frames travel over the other transports.
func (m *module) Reach(p btl.Peer) (btl.Endpoint, error) { return nil, nil }

// RMAKinds is device memory for ranks of this host that opened cuda too.
func (m *module) RMAKinds(p btl.Peer) btl.Kinds {
	if m.closed || !m.ipc || p.HostID != m.env.HostID || len(p.Addrs["cuda"]) == 0 {
		return 0
	}
	return btl.KindsOf(btl.MemDevice)
}

// Register describes device memory by its allocation's IPC handle.
func (m *module) Register(mem btl.Mem, r *btl.Region) error {
	if mem.Kind != btl.MemDevice {
		return fmt.Errorf("cuda: rank %d: register %v: %w (device memory only)", m.env.Rank, mem, btl.ErrRMARefused)
	}
	ctx, err := gpu.DeviceContext(int(mem.Device))
	if err != nil {
		return fmt.Errorf("cuda: rank %d: register %v: %w", m.env.Rank, mem, err)
	}
	base, size, err := ctx.AddressRange(drv.DevicePtr(mem.Ptr))
	if err != nil {
		return fmt.Errorf("cuda: rank %d: register %v: not device memory: %w", m.env.Rank, mem, err)
	}
	off := uint64(mem.Ptr) - uint64(base)
	if off+uint64(mem.N) > size {
		return fmt.Errorf("cuda: rank %d: register %v: runs past its allocation (%d bytes at %#x)", m.env.Rank, mem, size, base)
	}
	h, err := m.handle(ctx, int(mem.Device), base, size)
	if err != nil {
		return fmt.Errorf("cuda: rank %d: register %v: %w", m.env.Rank, mem, err)
	}
	x := m.own[h]
	if x == nil {
		x = &export{base: base, size: size}
		m.own[h] = x
	}
	x.refs++
	*r = btl.Region{Kind: btl.MemDevice, Addr: off, Len: uint64(mem.N), Handle: x}
	return r.SetKey(h[:])
}

// Deregister forgets an export once its last registration is released.
func (m *module) Deregister(r *btl.Region) {
	var h drv.IPCMemHandle
	copy(h[:], r.Key())
	if x := m.own[h]; x != nil {
		if x.refs--; x.refs <= 0 {
			delete(m.own, h)
		}
	}
}

// Get copies from the peer's region into op.Local.
func (m *module) Get(op *btl.RMAOp) error { return m.start(op, false) }

// Put copies op.Local into the peer's region.
func (m *module) Put(op *btl.RMAOp) error { return m.start(op, true) }

func (m *module) start(op *btl.RMAOp, put bool) error {
	what := "get from"
	if put {
		what = "put to"
	}
	fail := func(err error) error {
		return fmt.Errorf("cuda: rank %d: %s rank %d: %w", m.env.Rank, what, op.Peer, err)
	}
	if m.closed {
		return fail(btl.ErrClosed)
	}
	loc, rem := op.Local, op.Remote
	if loc.Kind != btl.MemDevice || rem.Kind != btl.MemDevice {
		return fail(fmt.Errorf("%v and %v memory: %w (device memory only)", loc.Kind, rem.Kind, btl.ErrRMARefused))
	}
	n := uint64(loc.N)
	if !op.InRegion() {
		return fail(fmt.Errorf("%d bytes at %d outside its region of %d", n, op.Offset, rem.Len))
	}
	if len(rem.Key()) != len(drv.IPCMemHandle{}) {
		return fail(fmt.Errorf("region key of %d bytes is not an IPC handle", len(rem.Key())))
	}
	if n == 0 {
		op.Owner.RMADone(op, nil)
		return nil
	}
	var h drv.IPCMemHandle
	copy(h[:], rem.Key())
	dev := int(loc.Device)
	var base drv.DevicePtr
	var mp *mapping
	if op.Peer == m.env.Rank {
		x := m.own[h]
		if x == nil || rem.Addr+rem.Len > x.size {
			return fail(errors.New("region not registered by this rank"))
		}
		base = x.base
	} else {
		var err error
		if mp, err = m.mapPeer(dev, op.Peer, h); err != nil {
			return fail(err)
		}
		if rem.Addr > mp.size || rem.Len > mp.size-rem.Addr {
			// A bad region must fail this operation, not fault the copy
			// engine (a sticky error that ends the whole CUDA context).
			return fail(fmt.Errorf("region %#x+%d outside the peer's allocation of %d bytes", rem.Addr, rem.Len, mp.size))
		}
		base = mp.base
	}
	s, err := m.stream(dev)
	if err != nil {
		return fail(err)
	}
	remote := base + drv.DevicePtr(rem.Addr+op.Offset)
	local := drv.DevicePtr(loc.Ptr)
	if put {
		err = s.CopyAsync(remote, local, int(n))
	} else {
		err = s.CopyAsync(local, remote, int(n))
	}
	if err != nil {
		return fail(err)
	}
	if err := m.watch(s, &copyOp{op: op, m: mp, dev: dev}); err != nil {
		op.Owner.RMADone(op, fail(err))
	}
	return nil
}

// watch records one event behind the copies just queued on s (cs, at
// least one), which share it, and lists them as pending, for Progress to
// report. When they cannot be watched (rare: the driver is failing) it
// waits for the stream here, rather than report the copies done early,
// and returns the error for the caller to report.
func (m *module) watch(s *drv.Stream, cs ...*copyOp) error {
	ev, err := m.event(s.Context())
	if err == nil {
		if err = ev.Record(s); err != nil {
			ev.Destroy()
		}
	}
	if err != nil {
		return errors.Join(err, s.Synchronize())
	}
	for _, c := range cs {
		c.ev, c.s = ev, s
		if c.m != nil {
			c.m.busy++
		}
	}
	cs[len(cs)-1].owner = true
	m.out[s] += len(cs)
	m.pending = append(m.pending, cs...)
	return nil
}

// stream returns the copy stream of device dev.
func (m *module) stream(dev int) (*drv.Stream, error) { return m.streamAt(dev, dev) }

// streamAt returns the stream of device dev kept under key in m.streams,
// made at its first use; Close synchronizes and destroys them all.
func (m *module) streamAt(key, dev int) (*drv.Stream, error) {
	if s := m.streams[key]; s != nil {
		return s, nil
	}
	s, err := gpu.NewStream(dev)
	if err != nil {
		return nil, err
	}
	m.streams[key] = s
	return s, nil
}

func (m *module) event(ctx *drv.Context) (*drv.Event, error) {
	for i := len(m.free) - 1; i >= 0; i-- {
		if ev := m.free[i]; ev.Context() == ctx {
			m.free = append(m.free[:i], m.free[i+1:]...)
			return ev, nil
		}
	}
	return ctx.NewEvent(drv.EventDisableTiming)
}

// mapPeer returns the mapping of rank peer's allocation into device dev,
// opening it (and unmapping the oldest idle one beyond the limit) on first
// use.
//
// A mapping goes stale when the peer frees its allocation, and the driver
// may then refuse to open the handle of a later allocation of the peer
// while the stale mapping stands (CUDA_ERROR_ALREADY_MAPPED: the GPU soak,
// internal/collsoak, whose buffers are allocated for each call and freed
// after it, met it within 5 to 28 calls in each of TestGPUCollSoak's
// three settings, puts into the peer's buffers). So on that error the
// peer's idle mappings on the device are unmapped, then every idle one
// there, and the handle opened again, as UCX's and Open MPI's CUDA IPC
// caches do on it. Which stale mapping the driver objects to was not
// pinned down: a probe on 2 H100s (a 64 KiB allocation at a freed one's
// address gets the freed one's handle; a 4 MiB one a new handle; both
// open beside the old mapping) did not fail; hence the sweep. A cache
// keyed by the peer's address ranges (UCX's) would drop only the stale
// mappings; the region key carries the handle alone.
func (m *module) mapPeer(dev, peer int, h drv.IPCMemHandle) (*mapping, error) {
	m.clock++
	k := mapKey{dev, h}
	if mp := m.maps[k]; mp != nil {
		mp.used = m.clock
		return mp, nil
	}
	ctx, err := gpu.DeviceContext(dev)
	if err != nil {
		return nil, err
	}
	if len(m.maps) >= m.limit {
		m.evict()
	}
	base, err := ctx.IPCOpenMemHandle(h)
	for _, all := range []bool{false, true} {
		if !errors.Is(err, drv.ErrorAlreadyMapped) {
			break
		}
		m.unmapIdle(dev, peer, all)
		base, err = ctx.IPCOpenMemHandle(h)
	}
	if err != nil {
		return nil, fmt.Errorf("map the peer's memory: %w", err)
	}
	_, size, err := ctx.AddressRange(base)
	if err != nil {
		unmap(dev, ctx, base)
		return nil, fmt.Errorf("size of the peer's mapped memory: %w", err)
	}
	mp := &mapping{ctx: ctx, peer: peer, base: base, size: size, used: m.clock}
	m.maps[k] = mp
	return mp, nil
}

// unmap closes a mapping of a peer's memory, with the device's resident
// kernel held (gpu.HoldServer): closing one may wait for the device's
// work.
func unmap(dev int, ctx *drv.Context, base drv.DevicePtr) error {
	defer gpu.HoldServer(dev)()
	return ctx.IPCCloseMemHandle(base)
}

// unmapIdle unmaps the mappings into device dev that no copy is using:
// rank peer's, or with all every one.
func (m *module) unmapIdle(dev, peer int, all bool) {
	for k, mp := range m.maps {
		if k.dev == dev && mp.busy == 0 && (all || mp.peer == peer) {
			unmap(k.dev, mp.ctx, mp.base)
			delete(m.maps, k)
		}
	}
}

// evict unmaps the least recently used mapping that no copy is using.
func (m *module) evict() {
	var old mapKey
	var oldest *mapping
	for k, mp := range m.maps {
		if mp.busy == 0 && (oldest == nil || mp.used < oldest.used) {
			old, oldest = k, mp
		}
	}
	if oldest != nil {
		unmap(old.dev, oldest.ctx, oldest.base)
		delete(m.maps, old)
	}
}

var _ btl.Busy = (*module)(nil)

// Busy reports copies in flight: their completion wakes no Waiter, so p2p
// must keep polling meanwhile.
func (m *module) Busy() bool { return len(m.pending) > 0 || len(m.queued) > 0 }

// Progress issues the copies listed since the last call and completes
// the copies whose events have passed.
func (m *module) Progress() int {
	if len(m.queued) > 0 {
		m.issue()
	}
	if len(m.pending) == 0 {
		return 0
	}
	// A stream runs its copies in order: behind one that has not ended,
	// none has, and its event is not queried (a window of 64 eager copies
	// would cost 64 queries a poll). The ended copies are taken out first
	// and finished after: a finish may queue new copies (a staged chunk
	// sent, the next one started), which go behind the ones still
	// pending, in the order of their streams.
	pend := m.pending
	m.pending = m.spare[:0]
	var bb [4]*drv.Stream
	busy := bb[:0]
	type ended struct {
		c   *copyOp
		err error
	}
	var eb [8]ended
	done := eb[:0]
	var last *drv.Event // copies issued together share an event: ask once
	var ok bool
	var err error
	for _, c := range pend {
		if slices.Contains(busy, c.s) {
			m.pending = append(m.pending, c)
			continue
		}
		if c.ev != last {
			last = c.ev
			ok, err = c.ev.Done()
		}
		if !ok && err == nil {
			m.pending = append(m.pending, c)
			busy = append(busy, c.s)
			continue
		}
		done = append(done, ended{c, err})
	}
	clear(pend)
	m.spare = pend[:0]
	for _, d := range done {
		m.finish(d.c, d.err)
	}
	return len(done)
}

func (m *module) finish(c *copyOp, err error) {
	if c.m != nil {
		c.m.busy--
	}
	m.out[c.s]--
	switch {
	case !c.owner:
	case err != nil:
		c.ev.Destroy()
	default:
		m.free = append(m.free, c.ev)
	}
	if c.stage != nil {
		c.stage.Owner.StageDone(c.stage, m.stageErr(c.stage, err))
		return
	}
	if err != nil {
		err = fmt.Errorf("cuda: rank %d: copy with rank %d: %w", m.env.Rank, c.op.Peer, err)
	}
	c.op.Owner.RMADone(c.op, err)
}

// Close waits for pending copies (their memory belongs to requests now
// failing), fails them with btl.ErrClosed and unmaps every mapping.
func (m *module) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	for _, s := range m.streams {
		s.Synchronize()
	}
	pending := m.pending
	m.pending = nil
	for _, c := range pending {
		m.finish(c, btl.ErrClosed)
	}
	queued := m.queued
	m.queued = nil
	for _, c := range queued {
		m.stageFailed(c, btl.ErrClosed)
	}
	for _, h := range m.pinned {
		h.Free()
	}
	m.pinned, m.freeHost = nil, nil
	m.exports = exportCache{}
	var first error
	for k, mp := range m.maps {
		if err := unmap(k.dev, mp.ctx, mp.base); err != nil && first == nil {
			first = fmt.Errorf("cuda: rank %d: unmap a peer's memory: %w", m.env.Rank, err)
		}
		delete(m.maps, k)
	}
	for _, ev := range m.free {
		ev.Destroy()
	}
	m.free = nil
	for d, s := range m.streams {
		s.Destroy()
		delete(m.streams, d)
	}
	return first
}
