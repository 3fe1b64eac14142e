package coll

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/gpu/kernels"
)

// The "ipc" GPU algorithms, for small and medium buffers on one host: each
// rank of a communicator allocates one device region, and every other rank
// maps it once (CUDA IPC, at the communicator's first such call). A call
// exchanges an empty host message with every peer ("ready": the sender has
// finished its earlier calls, so nothing still reads the slots this call
// writes), pushes its data straight into the peers' regions with the copy
// engines, synchronizes its stream, and exchanges a second empty message
// ("pushed"): when a rank has every peer's, what they pushed is in its own
// region, local memory for its kernels. That is one copy and two host
// round trips, where the p2p path pays a rendezvous (request, grant,
// completion) per message.
//
// The region holds two sets of n slots, used by calls of odd and even
// sequence numbers, so that the "pushed" messages of one call and the
// reads of the next need no ordering between them. Slot r of a set is
// written by rank r alone. Nothing depends on earlier calls having
// succeeded: a call that failed half-way leaves nothing that a later one
// reads.
//
// Every rank decides alike: the table picks "ipc" by size and process
// count, the algorithm runs it only on a communicator within one host, and
// the set-up ends with every rank telling the others whether it could map
// every region, so that either all use the regions or all fall back to the
// p2p algorithm.

// ipcSlot is the slot size for n ranks: 4 MiB, less from 8 ranks on, so
// that a region (2n slots) stays at 64 MiB.
func ipcSlot(n int) int {
	s := 4 << 20
	for s > 64<<10 && 2*n*s > 64<<20 {
		s >>= 1
	}
	return s
}

// ipcState is a communicator's IPC regions.
type ipcState struct {
	ok    bool // every rank mapped every region
	n     int
	dev   int // the device of this rank's region
	slot  int
	own   gpu.Buffer   // this rank's region
	peers []gpu.Buffer // rank r's region, mapped here (r != me)
	// handles names rank r's region (its IPC memory handle; zero where
	// it exported none), for the notices of gpuretire.go.
	handles [][handleBytes]byte
	// devs are the devices whose calls used the regions (dev, then those
	// that read it over peer access): close synchronizes them.
	devs []int
	// push: every rank can run the push kernels on the regions (a
	// second vote, after ok's): the kernels are loaded, the table of
	// region addresses is on the device and the error and completion
	// words are mapped.
	push bool
	// shared: another rank of the communicator runs on this rank's
	// device. Its push calls are then launched, never handed to the
	// device's resident kernel (gpu.Server): kernels of two processes
	// run on a GPU by turns, and a resident kernel spinning in its turn
	// would hold the other rank's calls back by a time slice each.
	shared bool
	// server is the region device's resident kernel, where this rank's
	// push calls go (those whose buffers are on that device): nil where
	// shared, where ranks outnumber the host's GPUs (gpusEnough), or
	// where it could not be made.
	server *gpu.Server
	table  gpu.Buffer     // rank r's region address (u64) at 8r
	words  *gpu.PushWords // the push kernels' error and completion words
	reg    gpu.PushRegion // the push kernel's view of the regions
	spin   time.Duration  // how long a push call polls the completion word (pPushSpin)

	// The call numbering of the push kernels (gpupush.go): this rank's
	// alternation of the two sets of slots (sets.Wrote: also an ipc
	// call's write of its parity's set), by the launches' numbers
	// (pushNum). pc is the current push launch's.
	sets gpu.PushSets
	pc   gpu.PushCall
}

// nextPush numbers launch phase (0; 1 and 2 for the later launches of a
// call that makes several: gpuAllreduceTwoshot) of push call c and takes
// the set of slots it writes: the other one than last time, written again
// only once every peer it writes to has acknowledged a launch after the
// one that last wrote it.
func (st *ipcState) nextPush(c *Comm, phase int) gpu.PushCall {
	return st.sets.Next(pushNum(c.seq, phase))
}

// ipcWrote records that ipc call c writes the set of its parity: a later
// push call writes this set again only once every peer has acknowledged a
// call after this one (its ipc reads are over), after the call's last
// push number.
func (st *ipcState) ipcWrote(c *Comm) { st.sets.Wrote[c.seq&1] = pushNum(c.seq, pushPhases-1) }

// pushNum is the number the push kernels know launch phase (0 to
// pushPhases-1) of the call of sequence number seq by: pushPhases a call,
// in call order, so that the launches of a two-shot call are told apart
// like calls. It holds for sequence numbers below 2^62
// (GORUN_COLL_SEQ_START and GORUN_COLL_SEQ_SKIP, the test knobs that
// start them high, stay well below that).
func pushNum(seq uint64, phase int) uint64 { return pushPhases*seq + uint64(phase) }

// pushPhases bounds the push launches of one call.
const pushPhases = 4

// ipcFlags is the byte offset of a region's flag area (after its two sets
// of n slots), and ipcFlagBytes its size: the push kernels' words
// (gpu.PushWordBytes: 2 KiB and 8 bytes a rank, 1 KiB and 8 bytes more).
// The slots are the same two sets the ipc algorithms use by their calls'
// parity; a push call's writer alternates them itself (ipcState.nextPush),
// so no slot is halved: a region stays 64 MiB of slots plus the words.
func ipcFlags(n, slot int) int   { return 2 * n * slot }
func ipcFlagBytes(n int) int     { return gpu.PushWordBytes(n) }
func (st *ipcState) region() int { return ipcFlags(st.n, st.slot) + ipcFlagBytes(st.n) }

// at returns m bytes of slot r of the set call c uses in region.
func (st *ipcState) at(c *Comm, region gpu.Buffer, r, m int) gpu.Buffer {
	return bytesOf(region, (int(c.seq&1)*st.n+r)*st.slot, m)
}

// gpuShared is the GPU state of a communicator (in shared).
type gpuShared struct {
	mu  sync.Mutex
	ipc *ipcState
}

// ipcRegions returns c's regions for a call moving at most size bytes per
// slot, setting them up at the first call (every rank is in the same call:
// the choice of algorithm is the same everywhere). A nil state with a nil
// error means "use the p2p algorithm": a communicator across hosts, a
// failed set-up, more bytes than a slot holds, a view of part of c (a level
// of a hierarchical algorithm: the regions are the whole communicator's),
// or a nonblocking call (it may overlap other calls, which the slots'
// turn-taking does not allow; every rank's call is nonblocking alike, so
// all fall back together).
func (c *Comm) ipcRegions(d *devCall, size int) (*ipcState, error) {
	if d.nb || c.Nodes != 1 || c.sh == nil || len(c.World) != len(c.sh.world) || size > ipcSlot(c.Size()) {
		return nil, nil
	}
	g := &c.sh.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ipc == nil {
		st, err := c.ipcSetup(d)
		g.ipc = st
		if err != nil {
			// Kept as failed, never retried: a set-up that fails part-way
			// may have succeeded on other ranks, and retrying would send
			// them set-up messages where they expect signals. Those ranks
			// then fail their ipc calls with a count error (not a hang);
			// the cause was a failed peer or link in the first place.
			st.unmap()
			return nil, err
		}
	}
	st := g.ipc
	if !st.ok || st.n != c.Size() {
		return nil, nil
	}
	if st.dev != d.dev {
		// This call's buffers are on another device than the region: its
		// kernels read the region over peer access.
		if err := gpu.EnablePeerAccess(d.dev, st.dev); err != nil {
			return nil, fmt.Errorf("GPU collective: device %d reading device %d: %w", d.dev, st.dev, err)
		}
		if !slices.Contains(st.devs, d.dev) {
			st.devs = append(st.devs, d.dev)
		}
	}
	return st, nil
}

// ipcSetup allocates this rank's region, gathers every rank's handle (a
// zero handle from a rank that could not export one), maps the peers'
// regions, and gathers every rank's verdict, so that the regions are used
// only if every rank mapped all of them.
func (c *Comm) ipcSetup(d *devCall) (*ipcState, error) {
	n, me := c.Size(), c.Rank()
	arm() // and free the regions of freed communicators whose peers have unmapped them
	st := &ipcState{n: n, dev: d.dev, slot: ipcSlot(n), peers: make([]gpu.Buffer, n), handles: make([][handleBytes]byte, n), devs: []int{d.dev}}
	msg := make([]byte, 1+gpu.IPCHandleSize+8) // ok flag, handle, device id
	id := deviceID(d.dev)
	binary.LittleEndian.PutUint64(msg[1+gpu.IPCHandleSize:], id)
	if own, err := gpu.Alloc(d.dev, gpu.Uint8, st.region()); err == nil {
		st.own = own
		// The push kernels' words start at zero (their calls' numbers
		// start at 1); set before any peer can map the region.
		if st.zeroFlags() == nil {
			if h, err := own.ExportIPC(); err == nil {
				// Recorded at once: a set-up that fails later may have
				// let some peers map it (gpuretire.go frees it only once
				// each has said it unmapped it).
				st.handles[me] = h.Mem
				if b, err := h.MarshalBinary(); err == nil {
					msg[0] = 1
					copy(msg[1:], b)
				}
			}
		}
	}
	all := make([]byte, n*len(msg))
	if err := collAllgather.runFlat(c, &Args{Send: msg, Recv: all}, nil); err != nil {
		return st, err
	}
	ok := true
	for r := range n {
		got := all[r*len(msg) : (r+1)*len(msg)]
		if r != me && id != 0 && binary.LittleEndian.Uint64(got[1+gpu.IPCHandleSize:]) == id {
			st.shared = true
		}
		var h gpu.IPCHandle
		if got[0] != 1 || h.UnmarshalBinary(got[1:1+gpu.IPCHandleSize]) != nil {
			ok = false
			continue
		}
		st.handles[r] = h.Mem
		if r != me && ok {
			var err error
			if st.peers[r], err = gpu.OpenIPC(d.dev, h); err != nil {
				ok = false
			}
		}
	}
	agreed, err := c.allAgree(ok)
	if err != nil {
		return st, err
	}
	st.ok = agreed
	if !st.ok {
		// This rank's region stays allocated: a peer may have mapped it.
		st.unmap()
		return st, nil
	}
	if st.push, err = c.allAgree(st.pushSetup(me)); err != nil {
		return st, err
	}
	if !st.push {
		st.freePush()
	}
	return st, nil
}

// deviceID is a digest of device dev's UUID, never 0 (0: unknown), by
// which the ranks of a communicator tell whether they share a GPU.
func deviceID(dev int) uint64 {
	u, err := cuda.Device(dev).UUID()
	if err != nil || u == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(u))
	return h.Sum64() | 1
}

// zeroFlags zeroes the flag area of this rank's region.
func (st *ipcState) zeroFlags() error {
	ctx, err := gpu.DeviceContext(st.dev)
	if err != nil {
		return err
	}
	return ctx.Memset(cuda.DevicePtr(st.own.Ptr()+uintptr(ipcFlags(st.n, st.slot))), 0, ipcFlagBytes(st.n))
}

// pushSetup readies this rank for the push kernels and reports whether
// it could: the kernels are loaded, the regions' addresses are on
// the device, the error and completion words are mapped.
func (st *ipcState) pushSetup(me int) bool {
	if st.n > kernels.PushMaxRanks || !gpu.HasPushKernels(st.dev) {
		return false
	}
	addrs := make([]byte, 8*st.n)
	for r := range st.n {
		b := st.own
		if r != me {
			b = st.peers[r]
		}
		binary.LittleEndian.PutUint64(addrs[8*r:], uint64(b.Ptr()))
	}
	table, err := gpu.Alloc(st.dev, gpu.Uint8, len(addrs))
	if err != nil {
		return false
	}
	if err := table.CopyFromHost(addrs); err != nil {
		_ = table.Free()
		return false
	}
	w, err := gpu.NewPushWords(st.dev)
	if err != nil {
		_ = table.Free()
		return false
	}
	st.table, st.words = table, w
	st.reg = gpu.PushRegion{Table: table.DevicePtr(), Ranks: st.n, Rank: me, Slot: st.slot,
		Flags: ipcFlags(st.n, st.slot), Words: w, Timeout: pushSlice}
	st.spin = pPushSpin()
	if !st.shared && gpusEnough() {
		// Where it cannot be made, the calls are launched: the peers
		// cannot tell.
		st.server, _ = gpu.ServerFor(st.dev, pGPUServe())
	}
	return true
}

// unmap unmaps the peers' regions and marks the state unusable. This
// rank's own region is never freed: peers may keep it mapped until they
// end, and CUDA leaves freeing memory that another process maps undefined.
func (st *ipcState) unmap() {
	for i, b := range st.peers {
		if b.Len() > 0 {
			_ = b.Free()
		}
		st.peers[i] = gpu.Buffer{}
	}
	st.freePush()
	st.ok = false
}

// freePush frees what pushSetup allocated (the table and the words are
// this rank's own: no peer maps them).
func (st *ipcState) freePush() {
	if st.table.Len() > 0 {
		_ = st.table.Free()
		st.table = gpu.Buffer{}
	}
	if st.words != nil {
		_ = st.words.Free()
		st.words = nil
	}
	st.push = false
}

// close releases a communicator's GPU state (Comm.Close): it unmaps the
// peers' regions, tells the peers (world ranks world[r]) so and retires
// this rank's own, which is freed once every peer has unmapped it
// (gpuretire.go): Comm.Free does not wait for the peers, and CUDA leaves
// freeing memory that another process still maps undefined.
func (g *gpuShared) close(world []int, me int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ipc != nil {
		// This rank's kernels and copies into the peers' regions (a push
		// kernel's acknowledgements, an ipc call's copies after an error)
		// must be over before a peer learns it may free its region.
		// The devices' resident kernels held (or the synchronization and
		// the frees wait for them to end) until the regions are retired.
		for _, dev := range g.ipc.devs {
			defer gpu.HoldServer(dev)()
			if c, err := gpu.DeviceContext(dev); err == nil {
				c.Synchronize()
			}
		}
		g.ipc.unmap()
		retireRegions(g.ipc, world, me)
		g.ipc = nil
		return
	}
	reclaim()
}

// ipcExchange waits until every rank is ready (it has finished its
// earlier calls, so nothing still reads the slots this call writes),
// pushes send(r) (nothing when empty) into slot me of rank r's region for
// every peer r, and waits until every rank has pushed. It returns slot r
// of this rank's region for this call: what rank r pushed here.
func (d *devCall) ipcExchange(c *Comm, st *ipcState, send func(r int) gpu.Buffer) (func(r, n int) gpu.Buffer, error) {
	if err := barrierFlat(c); err != nil {
		return nil, err
	}
	st.ipcWrote(c)
	for r := range c.Size() {
		if b := send(r); r != c.Rank() && b.Len() > 0 {
			if err := d.copy(st.at(c, st.peers[r], c.Rank(), b.Len()), b); err != nil {
				return nil, err
			}
		}
	}
	if err := d.sync(); err != nil {
		return nil, err
	}
	if err := barrierFlat(c); err != nil {
		return nil, err
	}
	return func(r, m int) gpu.Buffer { return st.at(c, st.own, r, m) }, nil
}

// barrierFlat is the table's barrier on c (the ready and pushed rounds).
func barrierFlat(c *Comm) error { return collBarrier.runFlat(c, &Args{}, nil) }

// ipcReduce pushes send(r) to every peer r and reduces, in rank order,
// own (this rank's part) and what every peer pushed (m bytes each) into
// dst.
func (d *devCall) ipcReduce(c *Comm, st *ipcState, send func(r int) gpu.Buffer, own, dst gpu.Buffer) error {
	in, err := d.ipcExchange(c, st, send)
	if err != nil {
		return err
	}
	if err := d.reduceAll(c.Size(), dst, func(r int) gpu.Buffer {
		if r == c.Rank() {
			return own
		}
		return in(r, dst.Len())
	}); err != nil {
		return err
	}
	return d.sync()
}

// reduceAll reduces x(0) op x(1) op ... op x(n-1) into dst, in rank order.
func (d *devCall) reduceAll(n int, dst gpu.Buffer, x func(r int) gpu.Buffer) error {
	if err := d.reduce(dst, x(0), x(1)); err != nil {
		return err
	}
	for r := 2; r < n; r++ {
		if err := d.reduce(dst, dst, x(r)); err != nil {
			return err
		}
	}
	return nil
}

// gpuAllreduceIPC: every rank pushes its input to every peer and reduces
// the n inputs itself in rank order (one-shot); the p2p one-shot where the
// regions cannot serve.
func gpuAllreduceIPC(c *Comm, a *Args, d *devCall) error {
	st, err := c.ipcRegions(d, d.rcv.Len())
	if err != nil {
		return err
	}
	if st == nil {
		return gpuAllreduceOneshot(c, a, d)
	}
	own := d.own
	if d.in && c.Rank() >= 2 {
		// The first kernels would overwrite the input before its turn;
		// slot me of this rank's own region is never written by a peer.
		own = st.at(c, st.own, c.Rank(), d.rcv.Len())
		if err := d.copy(own, d.own); err != nil {
			return err
		}
	}
	return d.ipcReduce(c, st, func(int) gpu.Buffer { return d.own }, own, d.rcv)
}

// gpuReduceScatterIPC: block r of every input is pushed to rank r, which
// reduces the n blocks in rank order.
func gpuReduceScatterIPC(c *Comm, a *Args, d *devCall) error {
	me := c.Rank()
	m := a.Counts[me]
	st, err := c.ipcRegions(d, m)
	if err != nil {
		return err
	}
	if st == nil {
		return gpuReduceScatterOneshot(c, a, d)
	}
	displs := evenDispls(a.Counts)
	// In place, the output is block 0 of the input: rank 0's first kernel
	// reads each element before writing it; other ranks no longer need it.
	return d.ipcReduce(c, st, func(r int) gpu.Buffer { return bytesOf(d.own, displs[r], a.Counts[r]) },
		bytesOf(d.own, displs[me], m), bytesOf(d.rcv, 0, m))
}

// gpuAllgatherIPC: every rank pushes its block to every peer, then copies
// the pushed blocks into place from its region.
func gpuAllgatherIPC(c *Comm, a *Args, d *devCall) error {
	me := c.Rank()
	st, err := c.ipcRegions(d, a.Counts[me])
	if err != nil {
		return err
	}
	if st == nil {
		return gpuAllgatherDirect(c, a, d)
	}
	counts, displs := a.Counts, evenDispls(a.Counts)
	if d.in {
		d.own = bytesOf(d.rcv, displs[me], counts[me])
	}
	in, err := d.ipcExchange(c, st, func(int) gpu.Buffer { return d.own })
	if err != nil {
		return err
	}
	for r := range c.Size() {
		src := d.own
		if r != me {
			src = in(r, counts[r])
		}
		if err := d.copy(bytesOf(d.rcv, displs[r], counts[r]), src); err != nil {
			return err
		}
	}
	return d.sync()
}

// gpuBcastIPC: the root pushes the buffer to every rank, which copies it
// out of its region.
func gpuBcastIPC(c *Comm, a *Args, d *devCall) error {
	st, err := c.ipcRegions(d, d.rcv.Len())
	if err != nil {
		return err
	}
	if st == nil {
		return gpuBcastBinomial(c, a, d)
	}
	me := c.Rank()
	in, err := d.ipcExchange(c, st, func(int) gpu.Buffer {
		if me == a.Root {
			return d.rcv
		}
		return gpu.Buffer{}
	})
	if err != nil {
		return err
	}
	if me != a.Root {
		if err := d.copy(d.rcv, in(a.Root, d.rcv.Len())); err != nil {
			return err
		}
	}
	return d.sync()
}
