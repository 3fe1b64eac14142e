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
// Nothing waits on the network under the lock. No method may block on a
// peer: not to connect, not for a handshake, not for buffer space, not for
// an acknowledgement. A module that must wait starts the work (a
// non-blocking connect, a queued frame, a posted RDMA read), returns, and
// finishes it in later Progress calls, as NCCL's net plugins do ("return
// NULL, call again"). A Send to a peer that never answers therefore
// returns at once, and every other peer's traffic, the failure detector and
// other goroutines' MPI calls go on (btltest's "connect" case checks it).
// Copying memory the process can already reach (a memcpy into a ring, a
// process_vm_readv of a local peer) is not waiting, and may be done inline.
// Waiter.Wait is the one call allowed to sleep, for at most the duration
// it is given.
//
// Memory kinds. Below package mpi a buffer is a Mem: host memory (a []byte)
// or device memory (a CUDA device address, its device and length). Frames
// carry host bytes only: Frame.Payload stays a []byte, so the eager path
// pays nothing for device support. Device memory moves by RMA, when the
// route's module can touch it, or through a host staging pipeline that
// p2p drives.
//
// RMA. A module that can move bytes to and from a peer's memory without
// the peer's CPU implements RMA (rma.go), as Open MPI's btl.h does with
// register_mem, get and put. The calls and their completion:
//
//   - RMAKinds(peer): the memory kinds reachable with peer; asked once per
//     route. Empty means no RMA with that peer. RMA need not come from the
//     module that carries the route's frames: p2p asks every module, and a
//     transfer uses the first (in registry order) whose kinds hold the
//     sender's buffer's kind, and fails over to another path when that
//     module cannot also reach the receiver's kind. A region's kind thereby
//     names the module that registered it, the same on both sides.
//   - Register(mem, &region): synchronous; fills the region's kind, address,
//     length and key (at most MaxKeySize bytes), which p2p encodes into its
//     RTS or CTS (Region.Encode, at most MaxRegionSize bytes), and the
//     module's private Handle. Registrations are cached by the module;
//     each is paired with one Deregister once the transfer completed.
//   - Get(op) and Put(op): asynchronous. Accepted (nil error): RMADone is
//     called exactly once, from inside the call or from a later Progress,
//     when every byte is in place at the destination, or with the error
//     that ended the transfer (peer died, bad address, module closed).
//     Refused (error): nothing started, no RMADone. The caller keeps op,
//     the local memory and the regions valid until RMADone.
//   - Close: operations still pending complete with ErrClosed.
//
// Regions decoded from a peer (DecodeRegion) are untrusted: a module
// checks that Offset+length stays inside Remote.Len and fails the operation
// (not the process) on a bad address.
//
// Placement. Env and Peer carry a Placement from the business cards: local
// rank and size, NUMA node, GPU bus ids, NICs. Modules read it there, never
// from the environment.
//
// Adding a transport (the role of Open MPI's btl/template):
//
//  1. Write package btl/<name>: a Component whose Open returns a Module (or
//     an error, which only skips this transport), registered from init with
//     Register("<name>", component{}). Its doc.go starts from this one and
//     states, for each call, when it completes.
//  2. Implement Module and Endpoint. Add Waiter if the module can sleep
//     until input (a file descriptor, a futex) and RMA if it can reach
//     peers' memory.
//  3. Add the package to btl/all, the one list of built-in transports that
//     package mpi and gorun --help-params import; declare tunables with
//     internal/params (GORUN_<NAME>_<KNOB>) so that --help-params lists
//     them.
//  4. Add one test: btltest.Run(t, btltest.Transport{Name: "<name>"}). The
//     suite's RMA cases run when the module implements RMA. Test matrices
//     iterate Names(), so the new transport joins them by registering.
package btl
