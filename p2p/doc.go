// Package p2p is the point-to-point engine: it matches messages to receives
// by (context, source, tag) with wildcards, keeps MPI's non-overtaking order
// per sender and context, chooses eager or rendezvous per message from the
// transport's caps, and drives progress.
//
// Buffers arrive as btl.Mem (package mpi describes each once): host bytes
// or device memory. p2p chooses the protocol per message (header.go has the
// frame layout, rma.go the RMA side):
//
//	eager:      EAGER(header+data)                          host memory, len <= route's EagerLimit, not synchronous
//	rendezvous: RTS -> (receiver matches) CTS -> DATA       host memory, larger or Ssend, route without RMA
//	RMA:        RTS(region) -> CTS(region) -> Get | Put -> FIN_R, FIN_S
//	                                                        the route's module has btl.RMA for both buffers' kinds
//	staged:     RTS -> CTS -> DATA(chunk, offset)...       device memory on a route without RMA for it (stage.go)
//	eager staged: (copy to host) EAGER(header+data)       such device memory, len <= the route's EagerLimit and
//	                                                        GORUN_P2P_DEVICE_EAGER, not synchronous (stage.go)
//	no path:    RTS -> CTS(fNoPath), both fail with ErrNoDevicePath
//	                                                        device memory and no module to reach or stage it (the
//	                                                        RTS says fDevice when it is the sender's memory)
//
// An eager staged send copies the device bytes to host memory before its
// frame goes (one small copy on the GPU's eager stream, into a pinned
// buffer of the pool given back at FrameDone); the call returns while the
// copy runs, and the frame goes when it is done. Meanwhile the route holds
// every later EAGER and RTS behind it, in order (stage.go, hold), so
// that nothing overtakes it; control frames (CTS, DATA, FIN) do not wait.
// It completes like a host eager send once its frame is done. The receiver takes it like any eager message: into
// a host buffer by a plain copy; for a device buffer it lands in pinned
// host memory and is copied to the device asynchronously (the staged
// receive's path), and the receive completes when that copy is done; an
// unexpected one waits in host memory until a receive takes it. A copy
// that fails at the sender sends an empty EAGER with fFail (the header
// keeps the length): the receive that matches it fails too.
//
// The CTS carries the length the receiver accepts, so a truncated receive
// never moves the bytes it would throw away. DATA is a single frame; the
// transport fragments it and places it straight into the receive buffer.
// In an RMA rendezvous each side registers its buffer (btl.RMA.Register)
// and sends the region in its RTS or CTS; the receiver gets the first part
// of the message while the sender puts the rest (the split copy, header.go;
// between two device buffers the sender puts it all by default, and the
// receiver's CTS always says who copies what),
// each operation completes through RMADone (inside the call or from a later
// Progress: nothing waits under the lock), each side sends exactly one FIN
// when its part is over (fFail when it failed), and a request completes
// once both parts are over, failed if either failed; then its
// registration is released. A part the system refuses after the route
// said it had RMA (btl.ErrRMARefused: a rank made non-dumpable after the
// probe) goes as a DATA frame instead, at its offset, when both buffers
// are host memory: the sender's own part before its FIN; the receiver's
// when the receiver's FIN asks for it (fResend), and the receiver's part
// is then over when it lands (rma.go). A staged transfer that fails tells the receiver (an empty DATA
// with fFail), and a request with copies of its own still in flight
// completes only when they end, so that no copy touches a buffer the user
// has back. A frame that contradicts the protocol (a CTS for no send, a
// malformed region) fails its sender as a peer (ErrProcFailed wrapping
// ErrProtocol): whatever waits on it ends.
//
// Ordering rests on the transports: each peer is reached through exactly one
// module, which delivers that peer's frames in order, and matching happens in
// arrival order. An unexpected message is never dropped: it waits, with its
// data (eager) or its RTS (rendezvous), until a receive matches it.
//
// Concurrency: one mutex serializes the engine and every transport; calls are
// safe from any goroutine. Blocking calls poll the transports in the calling
// goroutine (no progress thread: docs/measurements.md measured 0.3-0.7 µs per message for
// a hand-off), spinning first, then yielding the CPU, then blocking in the
// transport's Waiter (see wait.go).
//
// Buffers: a send buffer is read by the transport until the request
// completes; a receive buffer is written until the request completes. The
// caller keeps them alive and unmodified until then. Ranks here are world
// ranks; communicators and their rank translation live in package mpi.
package p2p
