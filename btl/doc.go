// Package btl defines the byte-transfer layer: the contract between the
// point-to-point engine (package p2p) and the transports that move bytes
// (btl/self, btl/sm, btl/tcp, ...), plus the registry through which
// transports plug in and the selection of one transport per peer.
//
// A BTL moves frames: a fixed-size opaque Header (p2p's business, never
// interpreted here) followed by a payload of any length. A BTL delivers the
// frames of one peer in the order that peer sent them (FIFO per sender); p2p
// builds MPI's non-overtaking order on that guarantee.
//
// Concurrency contract. Every Module and Endpoint method except Close is
// called with the engine's lock held, from the goroutine of the MPI call that
// drives progress; BTLs therefore need no locking of their own except for
// state shared with goroutines they start themselves (for example an accept
// loop). Handler and Completer callbacks are made from inside Progress or
// Send on that same goroutine, with the lock still held: they must not block
// and must not call back into the engine's public API.
//
// Buffer ownership. A Frame and its Payload belong to the BTL from Send until
// the BTL calls the frame's Owner.FrameDone; the caller must not touch or
// reuse them before. The slice a Handler returns from Begin belongs to the
// BTL until the matching End.
//
// Nothing here may know about tags, matching or communicators.
package btl
