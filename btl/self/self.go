// Package self is the transport a rank uses to send to itself: frames are
// queued by Send and copied into the receiver's buffer by Progress, so a
// send to oneself behaves like any other (it completes once delivered, and a
// rendezvous waits for the matching receive).
//
// It implements btl.RMA for host memory, so that a large message to oneself
// takes one copy and p2p's RMA rendezvous can be tested without a second
// process: Register remembers the buffer under its address, and Get and Put
// copy to or from a registered buffer, checked against its bounds, before
// they return (RMADone is called inside the call). A region that was not
// registered here is refused; no address is ever dereferenced unchecked.
package self

import (
	"fmt"

	"github.com/gorun/gorun/btl"
)

func init() { btl.Register("self", component{}) }

type component struct{}

func (component) Open(env btl.Env) (btl.Module, error) {
	m := &module{rank: env.Rank, h: env.Handler}
	m.whole, _ = env.Handler.(btl.WholeHandler)
	return m, nil
}

type module struct {
	rank  int
	h     btl.Handler
	whole btl.WholeHandler // h, when it takes whole frames (SendNow)
	queue []*btl.Frame
	head  int
	// regs are the registered buffers by address, with a count of
	// registrations.
	regs map[uint64]*reg
}

type reg struct {
	b    []byte
	refs int
}

var (
	_ btl.Module    = (*module)(nil)
	_ btl.RMA       = (*module)(nil)
	_ btl.Immediate = (*module)(nil)
)

func (m *module) Name() string { return "self" }

func (m *module) Caps() btl.Caps {
	// Self has no wire: the eager limit only bounds the copy into an
	// unexpected buffer before the receive is posted.
	return btl.Caps{EagerLimit: 64 << 10, MaxFrag: 1 << 62, Exclusivity: btl.ExclusivitySelf}
}

func (m *module) Address() []byte { return nil }

func (m *module) Reach(p btl.Peer) (btl.Endpoint, error) {
	if p.Rank != m.rank {
		return nil, nil
	}
	return m, nil
}

// Send queues f; Progress delivers it.
func (m *module) Send(f *btl.Frame) error {
	if m.h == nil {
		return btl.ErrClosed
	}
	m.queue = append(m.queue, f)
	return nil
}

// SendNow delivers a frame at once when nothing queued waits ahead of it
// (two messages of one sender arrive in the order sent): the handler
// copies it into its posted receive or keeps it as unexpected, so the
// send needs no request. A nonblocking collective's completion notice is
// such a send: through Send it took a request that nobody gave back
// (each call's 420 bytes of garbage).
func (m *module) SendNow(h *btl.Header, payload []byte) bool {
	if m.h == nil || m.head < len(m.queue) {
		return false
	}
	if m.whole != nil {
		// false is a frame the handler refused (a protocol error, which
		// it has reported): taken all the same, as a ring's is.
		m.whole.Whole(m.rank, h, payload)
		return true
	}
	m.deliver(h, payload)
	return true
}

// deliver hands a frame to the handler: its header, then its payload
// copied where the handler says.
func (m *module) deliver(h *btl.Header, payload []byte) {
	dst := m.h.Begin(m.rank, h, len(payload))
	copy(dst, payload)
	m.h.End(m.rank, h, dst)
}

func (m *module) Progress() int {
	if len(m.queue) == 0 {
		return 0 // nothing sent to itself: the common case, polled on every wait
	}
	n := 0
	// Frames queued while delivering (a CTS answering an RTS) wait for the
	// next call, which keeps delivery iterative.
	end := len(m.queue)
	for m.head < end {
		f := m.queue[m.head]
		m.queue[m.head] = nil
		m.head++
		m.deliver(&f.Hdr, f.Payload)
		f.Owner.FrameDone(f, nil)
		n++
	}
	if m.head == len(m.queue) {
		m.queue = m.queue[:0]
		m.head = 0
	}
	return n
}

func (m *module) Close() error {
	for _, f := range m.queue[m.head:] {
		f.Owner.FrameDone(f, btl.ErrClosed)
	}
	m.queue, m.head, m.h, m.whole, m.regs = nil, 0, nil, nil, nil
	return nil
}

// RMAKinds is host memory, with this rank only.
func (m *module) RMAKinds(peer btl.Peer) btl.Kinds {
	if peer.Rank != m.rank || m.h == nil {
		return 0
	}
	return btl.KindsOf(btl.MemHost)
}

// Register remembers mem's bytes under their address.
func (m *module) Register(mem btl.Mem, r *btl.Region) error {
	if mem.Kind != btl.MemHost {
		return fmt.Errorf("self: register %v: %w (host memory only)", mem, btl.ErrRMARefused)
	}
	if m.regs == nil {
		m.regs = map[uint64]*reg{}
	}
	a := uint64(mem.Addr())
	g := m.regs[a]
	if g == nil || len(g.b) < len(mem.Bytes) {
		if g == nil {
			g = &reg{}
			m.regs[a] = g
		}
		g.b = mem.Bytes
	}
	g.refs++
	*r = btl.Region{Kind: btl.MemHost, Addr: a, Len: uint64(len(mem.Bytes)), Handle: g}
	return nil
}

// Deregister forgets the buffer once its last registration is released.
func (m *module) Deregister(r *btl.Region) {
	g := m.regs[r.Addr]
	if g == nil {
		return
	}
	if g.refs--; g.refs <= 0 {
		delete(m.regs, r.Addr)
	}
}

// Get copies from a registered buffer into op.Local.
func (m *module) Get(op *btl.RMAOp) error { return m.rma(op, false) }

// Put copies op.Local into a registered buffer.
func (m *module) Put(op *btl.RMAOp) error { return m.rma(op, true) }

func (m *module) rma(op *btl.RMAOp, put bool) error {
	if m.h == nil {
		return btl.ErrClosed
	}
	if op.Peer != m.rank || op.Local.Kind != btl.MemHost || op.Remote.Kind != btl.MemHost {
		return fmt.Errorf("self: rma with rank %d, %v and %v: %w", op.Peer, op.Local, op.Remote.Kind, btl.ErrRMARefused)
	}
	g := m.regs[op.Remote.Addr]
	n := uint64(len(op.Local.Bytes))
	if g == nil || op.Remote.Len > uint64(len(g.b)) || !op.InRegion() {
		return fmt.Errorf("self: rma of %d bytes at %d in region %#x+%d: not a registered range", n, op.Offset, op.Remote.Addr, op.Remote.Len)
	}
	remote := g.b[op.Offset : op.Offset+n]
	if put {
		copy(remote, op.Local.Bytes)
	} else {
		copy(op.Local.Bytes, remote)
	}
	op.Owner.RMADone(op, nil)
	return nil
}
