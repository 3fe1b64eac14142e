// Package self is the transport a rank uses to send to itself: frames are
// queued by Send and copied into the receiver's buffer by Progress, so a
// send to oneself behaves like any other (it completes once delivered, and a
// rendezvous waits for the matching receive).
package self

import (
	"github.com/gorun/gorun/btl"
)

func init() { btl.Register("self", component{}) }

type component struct{}

func (component) Open(env btl.Env) (btl.Module, error) {
	return &module{rank: env.Rank, h: env.Handler}, nil
}

type module struct {
	rank  int
	h     btl.Handler
	queue []*btl.Frame
	head  int
}

var _ btl.Module = (*module)(nil)

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

func (m *module) Progress() int {
	n := 0
	// Frames queued while delivering (a CTS answering an RTS) wait for the
	// next call, which keeps delivery iterative.
	end := len(m.queue)
	for m.head < end {
		f := m.queue[m.head]
		m.queue[m.head] = nil
		m.head++
		dst := m.h.Begin(m.rank, &f.Hdr, len(f.Payload))
		copy(dst, f.Payload)
		m.h.End(m.rank, &f.Hdr, dst)
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
	m.queue, m.head, m.h = nil, 0, nil
	return nil
}
