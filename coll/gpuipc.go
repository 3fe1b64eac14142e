package coll

import (
	"fmt"
	"sync"

	"github.com/gorun/gorun/gpu"
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
}

// at returns m bytes of slot r of the set call c uses in region.
func (st *ipcState) at(c *Comm, region gpu.Buffer, r, m int) gpu.Buffer {
	return bytesOf(region, (int(c.seq&1)*st.n+r)*st.slot, m)
}

// gpuShared is the GPU state of a communicator (in shared).
type gpuShared struct {
	mu  sync.Mutex
	ipc *ipcState
}

// ipcRegions returns c's regions, setting them up at the first call (every
// rank is in the same call: the choice of algorithm is the same
// everywhere). A nil state with a nil error means "use the p2p algorithm".
func (c *Comm) ipcRegions(d *devCall) (*ipcState, error) {
	if c.Nodes != 1 || c.sh == nil {
		return nil, nil
	}
	g := &c.sh.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ipc == nil {
		st, err := c.ipcSetup(d)
		if err != nil {
			// Kept as failed, never retried: a set-up that fails part-way
			// may have succeeded on other ranks, and retrying would send
			// them set-up messages where they expect signals. Those ranks
			// then fail their ipc calls with a count error (not a hang);
			// the cause was a failed peer or link in the first place.
			st.unmap()
			g.ipc = st
			return nil, err
		}
		g.ipc = st
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
	}
	return st, nil
}

// ipcSetup allocates this rank's region, sends its handle to every peer,
// maps theirs, and agrees with them on whether all of that worked.
func (c *Comm) ipcSetup(d *devCall) (*ipcState, error) {
	n, me := c.Size(), c.Rank()
	st := &ipcState{n: n, dev: d.dev, slot: ipcSlot(n), peers: make([]gpu.Buffer, n)}
	const hsize = 81 // gpu.IPCHandle's binary form
	msg := make([]byte, 1+hsize)
	own, err := gpu.Alloc(d.dev, gpu.Uint8, 2*n*st.slot)
	if err == nil {
		st.own = own
		var h gpu.IPCHandle
		if h, err = own.ExportIPC(); err == nil {
			var b []byte
			if b, err = h.MarshalBinary(); err == nil && len(b) == hsize {
				msg[0] = 1
				copy(msg[1:], b)
			}
		}
	}
	got := make([][]byte, n)
	var p pending
	for r := range n {
		if r != me {
			got[r] = make([]byte, len(msg))
			if err := p.recv(c, got[r], r); err != nil {
				return st, err
			}
			if err := p.send(c, msg, r); err != nil {
				return st, err
			}
		}
	}
	if err := p.wait(c); err != nil {
		return st, err
	}
	ok := msg[0] == 1
	for r := range n {
		if r == me || !ok {
			continue
		}
		var h gpu.IPCHandle
		if got[r][0] != 1 || h.UnmarshalBinary(got[r][1:]) != nil {
			ok = false
			continue
		}
		if st.peers[r], err = gpu.OpenIPC(d.dev, h); err != nil {
			ok = false
		}
	}
	// Agree: the regions are used only if every rank mapped all of them.
	vote := []byte{0}
	if ok {
		vote[0] = 1
	}
	votes := make([]byte, n)
	for r := range n {
		if r != me {
			if err := p.recv(c, votes[r:r+1], r); err != nil {
				return st, err
			}
			if err := p.send(c, vote, r); err != nil {
				return st, err
			}
		}
	}
	if err := p.wait(c); err != nil {
		return st, err
	}
	for r := range n {
		if r != me && votes[r] != 1 {
			ok = false
		}
	}
	st.ok = ok
	if !ok {
		// This rank's region stays allocated: a peer may have mapped it.
		st.unmap()
	}
	return st, nil
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
	st.ok = false
}

// close releases a communicator's GPU state (Comm.Close): it unmaps the
// peers' regions but keeps this rank's own until the process ends, since
// Comm.Free does not wait for the peers and CUDA leaves freeing memory that
// another process still maps undefined.
func (g *gpuShared) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ipc != nil {
		g.ipc.unmap()
		g.ipc = nil
	}
}

// ipcExchange exchanges the "ready" messages, pushes send(r) (nothing when
// empty) into slot me of rank r's region for every peer r, and exchanges
// the "pushed" messages. It returns slot r of this rank's region for this
// call: what rank r pushed here.
func (d *devCall) ipcExchange(c *Comm, st *ipcState, send func(r int) gpu.Buffer) (func(r, n int) gpu.Buffer, error) {
	n, me := c.Size(), c.Rank()
	signal := func() error {
		var p pending
		for r := range n {
			if r != me {
				if err := p.recv(c, nil, r); err != nil {
					return err
				}
				if err := p.send(c, nil, r); err != nil {
					return err
				}
			}
		}
		return p.wait(c)
	}
	if err := signal(); err != nil {
		return nil, err
	}
	for r := range n {
		if r == me {
			continue
		}
		if b := send(r); b.Len() > 0 {
			if err := d.copy(st.at(c, st.peers[r], me, b.Len()), b); err != nil {
				return nil, err
			}
		}
	}
	if err := d.sync(); err != nil {
		return nil, err
	}
	if err := signal(); err != nil {
		return nil, err
	}
	return func(r, m int) gpu.Buffer { return st.at(c, st.own, r, m) }, nil
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
func gpuAllreduceIPC(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	st, err := c.ipcRegions(d)
	size := d.rcv.Len()
	if err != nil || st == nil || size > st.slot {
		if err != nil {
			return err
		}
		return gpuAllreduceOneshot(c, a)
	}
	n, me := c.Size(), c.Rank()
	own := d.own
	if d.in && me >= 2 {
		// The first kernels would overwrite the input before its turn;
		// slot me of this rank's own region is never written by a peer.
		keep := st.at(c, st.own, me, size)
		if err := d.copy(keep, own); err != nil {
			return err
		}
		own = keep
	}
	in, err := d.ipcExchange(c, st, func(int) gpu.Buffer { return d.own })
	if err != nil {
		return err
	}
	if err := d.reduceAll(n, d.rcv, func(r int) gpu.Buffer {
		if r == me {
			return own
		}
		return in(r, size)
	}); err != nil {
		return err
	}
	return d.sync()
}

// gpuReduceScatterIPC: block r of every input is pushed to rank r, which
// reduces the n blocks in rank order.
func gpuReduceScatterIPC(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	st, err := c.ipcRegions(d)
	me := c.Rank()
	if err != nil || st == nil || a.Counts[me] > st.slot {
		if err != nil {
			return err
		}
		return gpuReduceScatterOneshot(c, a)
	}
	n, m := c.Size(), a.Counts[me]
	displs := evenDispls(a.Counts)
	in, err := d.ipcExchange(c, st, func(r int) gpu.Buffer { return bytesOf(d.own, displs[r], a.Counts[r]) })
	if err != nil {
		return err
	}
	// In place, the output is block 0 of the input: rank 0's first kernel
	// reads each element before writing it; other ranks no longer need it.
	if err := d.reduceAll(n, bytesOf(d.rcv, 0, m), func(r int) gpu.Buffer {
		if r == me {
			return bytesOf(d.own, displs[me], m)
		}
		return in(r, m)
	}); err != nil {
		return err
	}
	return d.sync()
}

// gpuAllgatherIPC: every rank pushes its block to every peer, then copies
// the pushed blocks into place from its region.
func gpuAllgatherIPC(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	st, err := c.ipcRegions(d)
	me := c.Rank()
	if err != nil || st == nil || a.Counts[me] > st.slot {
		if err != nil {
			return err
		}
		return gpuAllgatherDirect(c, a)
	}
	n := c.Size()
	counts, displs := a.Counts, evenDispls(a.Counts)
	mine := bytesOf(d.rcv, displs[me], counts[me])
	if d.in {
		d.own = mine
	}
	in, err := d.ipcExchange(c, st, func(int) gpu.Buffer { return d.own })
	if err != nil {
		return err
	}
	for r := range n {
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
func gpuBcastIPC(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	st, err := c.ipcRegions(d)
	if err != nil || st == nil || d.rcv.Len() > st.slot {
		if err != nil {
			return err
		}
		return gpuBcastBinomial(c, a)
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
