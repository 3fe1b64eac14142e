// Package p2p is the point-to-point engine: it matches messages to receives
// by (context, source, tag) with wildcards, keeps MPI's non-overtaking order
// per sender and context, chooses eager or rendezvous per message from the
// transport's caps, and drives progress.
//
// Protocols (header.go has the frame layout):
//
//	eager:      EAGER(header+data)                       len <= route's EagerLimit, not synchronous
//	rendezvous: RTS -> (receiver matches) CTS -> DATA    larger, or Ssend
//
// The CTS carries the length the receiver accepts, so a truncated receive
// never moves the bytes it would throw away. DATA is a single frame; the
// transport fragments it and places it straight into the receive buffer.
//
// Ordering rests on the transports: each peer is reached through exactly one
// module, which delivers that peer's frames in order, and matching happens in
// arrival order. An unexpected message is never dropped: it waits, with its
// data (eager) or its RTS (rendezvous), until a receive matches it.
//
// Concurrency: one mutex serializes the engine and every transport; calls are
// safe from any goroutine. Blocking calls poll the transports in the calling
// goroutine (no progress thread: BENCH.md measured 0.3-0.7 µs per message for
// a hand-off), spinning first, then yielding the CPU, then blocking in the
// transport's Waiter (see wait.go).
//
// Buffers: a send buffer is read by the transport until the request
// completes; a receive buffer is written until the request completes. The
// caller keeps them alive and unmodified until then. Ranks here are world
// ranks; communicators and their rank translation live in package mpi.
package p2p
