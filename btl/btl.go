package btl

import (
	"errors"
	"time"
)

// HeaderSize is the size in bytes of the opaque header every frame carries.
// 48 bytes hold p2p's header (kind, context, source, tag, sequence, length
// and two request ids) with no padding to spare.
const HeaderSize = 48

// Header is the opaque fixed-size part of a frame. BTLs copy it verbatim.
type Header [HeaderSize]byte

// Flags describe optional abilities of a module.
type Flags uint32

const (
	// FlagSendInPlace means Send may complete before returning (the frame is
	// copied or written synchronously), so callers should check for that.
	FlagSendInPlace Flags = 1 << iota
)

// Caps is what a module tells p2p about itself.
type Caps struct {
	// EagerLimit is the largest message p2p sends eagerly (header and data in
	// one frame, completed without the receiver's consent). Larger messages
	// go by rendezvous.
	EagerLimit int
	// MaxFrag is the largest piece the module moves at once; informational,
	// since modules fragment frames themselves.
	MaxFrag int
	// Exclusivity ranks modules that reach the same peer: the highest wins.
	Exclusivity int
	// Flags are optional abilities.
	Flags Flags
}

// Exclusivity levels of the built-in modules.
const (
	ExclusivitySelf = 1 << 16
	ExclusivitySM   = 1 << 15
	ExclusivityTCP  = 1 << 8
)

// Peer is what a module knows of another rank when asked to reach it: its
// world rank, its host identity and the addresses its modules published.
type Peer struct {
	Rank   int
	HostID string
	PID    int
	Placement
	// Addrs maps a module name to the address that module published
	// (Module.Address) in the peer's business card.
	Addrs map[string][]byte
}

// Placement is where a rank runs, as its business card tells: transports
// use it to choose paths (sm knows how many local peers will attach, cuda
// matches GPUs, ofi picks the NIC nearest a GPU). LocalSize 0 means the
// whole placement is unknown (a zero Placement).
type Placement struct {
	// LocalRank and LocalSize: this rank's index among the ranks of its
	// host, and their number (0 when unknown).
	LocalRank, LocalSize int
	// NUMA is the NUMA node the rank is bound to; -1 when it is not bound
	// within one node or that is unknown.
	NUMA int
	// GPUs are the PCI bus ids ("0000:18:00.0") of the GPUs the rank may
	// use, in CUDA's order; empty when it has none or they are unknown.
	GPUs []string
	// NICs are the network interfaces the rank's transports use.
	NICs []string
}

// Frame is one unit handed to Endpoint.Send.
type Frame struct {
	Hdr     Header
	Payload []byte
	// Owner is told when the module no longer needs the frame.
	Owner Completer
}

// Completer is notified once per frame sent, with nil or the error that
// ended the transfer. FrameDone may be called from inside Send (for frames
// that go out at once) or later from inside Progress.
type Completer interface {
	FrameDone(f *Frame, err error)
}

// Handler receives frames. p2p implements it.
type Handler interface {
	// Begin is called when a frame's header has arrived, with the payload
	// length n. It returns a slice of length n into which the module places
	// the payload; or, refusing a frame it cannot place (a protocol error,
	// which it has reported to itself as PeerFailed), a slice of another
	// length, nil: the module then drops the peer as for a malformed
	// stream, without End, and never has to drain a length that nothing
	// bounds.
	Begin(src int, h *Header, n int) []byte
	// End is called once the payload is complete in the slice Begin gave.
	End(src int, h *Header, data []byte)
	// PeerFailed reports that frames from or to src can no longer move
	// (connection lost, malformed stream). It is called at most once per
	// peer and module.
	PeerFailed(src int, err error)
}

// WholeHandler is a Handler that can take a frame whose header and
// payload a module holds together at once (a shared-memory ring's short
// record) in one call: Whole does what Begin, the copy into Begin's slice
// and End would, and reports false where Begin would have refused the
// frame. Modules use it when their Handler has it.
type WholeHandler interface {
	Handler
	Whole(src int, h *Header, payload []byte) bool
}

// Endpoint is a module's route to one peer.
type Endpoint interface {
	// Send queues f for transmission. A non-nil error means f was not
	// accepted and FrameDone will not be called.
	Send(f *Frame) error
}

// Immediate is what an Endpoint may also offer: a send that takes a
// whole frame at once, header and payload copied before it returns, or
// refuses it and keeps nothing (the caller then Sends a Frame as usual).
// It spares the small messages that make a program's message rate a
// request and a frame of their own, and their completion (Open MPI's
// btl sendi). A refusal is no error: a transport that cannot take the
// frame now (a queue ahead of it, no room, an error to report) refuses,
// and Send does the rest.
type Immediate interface {
	SendNow(h *Header, payload []byte) bool
}

// Module is one opened transport.
type Module interface {
	// Name is the component name ("tcp", "self", ...).
	Name() string
	// Caps describes the module.
	Caps() Caps
	// Address is published in this rank's business card for peers to use.
	Address() []byte
	// Reach returns an endpoint to p, or (nil, nil) when this module cannot
	// reach p.
	Reach(p Peer) (Endpoint, error)
	// Progress moves whatever can move without blocking and returns the
	// number of events (frames delivered or completed).
	Progress() int
	// Close releases the module's resources. Pending frames fail.
	Close() error
}

// Waiter is implemented by modules that can block until input may be
// available. p2p calls Wait, with the engine lock held (other goroutines' MPI
// calls wait meanwhile; d is at most GORUN_WAIT_SLEEP), when a request
// has waited long enough that spinning wastes the CPU.
type Waiter interface {
	Wait(d time.Duration)
}

// Busy is implemented by modules whose pending work completes without
// waking any Waiter (GPU copies finish on the device; only polling sees
// them). While Busy reports true, p2p does not sleep in a Waiter: it keeps
// polling, yielding the CPU between polls.
type Busy interface {
	Busy() bool
}

// Checker is implemented by modules that can tell, with nothing in flight
// to a peer, that it can no longer take part: its process exited, or it
// closed its transport (it finalized). CheckPeer reports a peer it finds
// gone as it would during a transfer (Handler.PeerFailed); it may look
// only now and then, and says nothing of a peer it cannot tell about (one
// it does not reach). It is called with the engine's lock held, as the
// Handler is.
type Checker interface {
	CheckPeer(p Peer)
}

// Env is what a component needs to open a module.
type Env struct {
	Rank   int
	Size   int
	JobID  string
	HostID string
	// Placement is this rank's own; every peer's travels in its Peer.
	Placement
	// Secret is the job secret; transports that accept connections use it to
	// authenticate peers.
	Secret []byte
	// BindAddr is the IP address a network transport listens on ("" means
	// the loopback address).
	BindAddr string
	// Handler receives every frame.
	Handler Handler
}

// Component opens modules; transports register one from init.
type Component interface {
	Open(env Env) (Module, error)
}

// ErrUnreachable is returned when no module reaches a peer.
var ErrUnreachable = errors.New("btl: no transport reaches the peer")

// ErrClosed is returned for operations on a closed module or endpoint.
var ErrClosed = errors.New("btl: closed")
