// Package sm is the shared-memory transport between ranks on one host.
//
// # Segments
//
// Each rank creates, at Open, its own receive segment: the file
// /dev/shm/gorun-<job>-sm-<rank>, mode 0600, created exclusively, and
// publishes that name as its address. (One segment per rank rather than
// one per host: no creation race, no need to know the local ranks at Open,
// which btl.Env does not tell, and a segment's lifetime is its owner's.)
// The file holds a control area and one ring per possible sender (the
// world size), but it is sparse: a ring's memory is allocated (fallocate)
// only when its sender first reaches this rank, so a full /dev/shm makes
// that Reach fall back to the next transport instead of a SIGBUS later.
//
//	control area (page multiple)
//	  line 0   magic, layout version, world size, ring geometry (slots,
//	           fragment size, ring offset and size), owner pid, closed
//	           flag, the header's address in the owner (single-copy probe),
//	           doorbell-mode flag
//	  line 2   waiters: owner's threads asleep in Wait
//	  line 4   seq: the futex word
//	  line 6   nreg: registry entries claimed; opened: peers that opened
//	           this file
//	  line 8+  registry: rank+1 of each sender, in the order they came
//	  then     doorbell: from the next line, one u64 per 64 senders (packed)
//	ring of sender s, at ringBase + s*ringSize
//	  page 0   head (consumer) | 2 lines on: producer pid, full flag,
//	           producer closed flag
//	  slots    slots x stride, each starting on a 128-byte boundary
//	slot, first fragment of a frame
//	  0 seq (ticket+1) | 8 frame length, and header length << 56 |
//	  16 the header without its trailing zero bytes | the payload
//	slot, later fragment
//	  0 seq | 64 the payload
//
// A small frame fits one cache line: p2p's eager header has 32 significant
// bytes, so seq, length, header and up to 16 payload bytes share the
// slot's first line, and larger payloads run on into the second line, its
// adjacent-line-prefetch partner. (Measured on the quiet 16-core device
// host, medians of 3 interleaved runs: a module ping-pong of 8 bytes took
// 474 ns one way with this layout and 599 ns with a fixed 64-byte header
// line in front of every payload; OSU latency at 8 bytes 0.60 µs against
// 0.75 µs.)
//
// Every atomic word is aligned to its size and lies inside one cache line
// (a straddling atomic takes a bus lock, ~0.5 ms here, docs/measurements.md); words
// written by different sides are on different lines (TestLayout).
//
// # Who writes what
//
// A ring has exactly one producer (the sender, through the mapping of the
// receiver's file it opened at Reach) and one consumer (the owner). The
// producer writes slots and the full flag; the consumer writes head. The
// producer publishes ticket t by storing t+1 into the seq word of slot
// t%slots after writing the slot's length, header and payload; the
// consumer, having seen seq == head+1, copies the payload out and stores
// head+1 into head, handing the slot back at once (so a large frame
// streams: the producer refills slot i while the consumer copies slot
// i+1). A slot is never reset: the previous lap's seq is t+1-slots, never
// t+1. Go's atomics are sequentially consistent (on amd64 the store is an
// XCHG, the load a plain MOV under TSO; on arm64 STLR/LDAR), which gives
// the release/acquire pairs this needs and the store-load order the wake
// protocol below needs.
//
// A frame is streamed through the ring in fragments: the first carries
// the frame's length and header, and the consumer calls Handler.Begin
// there, copies each fragment into the slice Begin returned, and calls End
// after the last. A fragment holds up to 65600 bytes (Caps.MaxFrag), so a
// frame of up to 64 KiB (every eager message, every 64 KiB rendezvous
// DATA) is one slot. Frames are FIFO per sender because one ring carries
// one sender's frames in order.
//
// Send writes as many fragments as the ring has free slots; what does not
// fit stays queued on the endpoint (back-pressure: Send never blocks) and
// Progress goes on with it. FrameDone comes once the last fragment is in
// the ring: the payload is no longer needed then.
//
// Registration: at Reach the sender maps its ring, writes its pid, claims a
// registry entry (fetch-add on nreg) and stores its rank+1 there. The
// owner's Progress reads nreg (one load per call of a line that rarely
// changes) and starts polling the rings of new senders; it also opens each
// sender's own segment, where that sender sleeps, to be able to wake it.
//
// # Doorbell
//
// With few senders the owner's Progress polls every inbound ring: one
// load of a line in cache per idle ring. With many (more than
// GORUN_SM_DOORBELL_AFTER, default 4) that is O(senders) per poll, so the
// owner switches to the doorbell: it stores 1 into the doorbell-mode word
// (never cleared), and from then on a producer, after the seq stores of a
// push, loads the mode word and, when set, loads its bit (word s/64, bit
// s%64 for sender s) and sets it with an atomic OR only if it is clear.
// The owner loads each doorbell word, swaps the non-zero ones to 0, adds
// the rings whose bits were set to its hot list, and polls only the hot
// rings; a ring leaves the list once a poll found it drained (the seq test
// failed, not the budget) with no frame half received. A poll then costs
// the doorbell words plus the rings with data, whatever the number of
// senders.
//
// Why no publish is missed (all atomics sequentially consistent: one
// total order S of them, consistent with each thread's program order).
// Let a producer store seq (publish P), then load the mode word (M) and,
// if set, load its bit (L) and maybe OR it (O).
//   - M read 0: M precedes the owner's mode store in S; the owner, in
//     the same Progress after that store, heats every ring it has (and
//     heats each ring adopted later), so its next seq load of this ring
//     follows P and sees the slot.
//   - M read 1, the bit was clear at L: O follows P, and the bit stays
//     set until a swap X after O returns it; the owner then polls the
//     ring after X, so after P.
//   - M read 1, the bit was set at L: only a swap clears it, so the first
//     swap X after L in S returns it; X follows P, and the poll after X
//     sees the slot.
//
// So every publish P is followed in S by a heating or a swap that
// returns its bit, and by a poll of its ring after that; a ring leaves
// the hot list only when a poll drained it (a frame half received, or a
// poll cut short by the budget, keeps it), so nothing rests in a ring
// that is neither hot nor rung. The owner swaps whenever it loads a
// non-zero word, so a set bit is always taken up. A bit may name a sender
// whose registration this Progress did not see yet (it registered after
// the nreg load): its registry entry was written before its first
// publish, hence before the OR, and pollBells adopts it then, which heats
// its ring.
//
// Wait's ready() checks, in doorbell mode, the doorbell words and the hot
// rings. The wake protocol below holds as before with the OR (or the
// load L that found the bit set) between the producer's seq store and its
// waiters load: a sleeper that counted itself in after that load sees the
// bit (or an earlier swap of its own already polled the ring after P).
//
// The doorbell is off with few senders because it adds a line that both
// sides write on every message to the latency path: at np=2 on the
// 64-core device host (medians of 7 interleaved runs) OSU latency at 8
// bytes was 0.33 us polling the ring and 0.53 us through the doorbell.
//
// # Waiting
//
// Wait(d) sleeps on the owner's seq word with FUTEX_WAIT (not private: the
// word is shared between processes), after counting itself into waiters
// and checking that nothing is pending. Whoever makes something pending
// for a sleeper (a producer that published, a consumer that freed a ring
// whose producer raised its full flag) stores that change, then loads
// waiters, and only if it is non-zero bumps seq and calls FUTEX_WAKE: a
// send to a receiver that is not asleep costs one load. The sleeper
// increments waiters before loading seq and checking, the waker stores
// before loading waiters; with sequentially consistent atomics one of the
// two sees the other (TestWakeProtocol). Wait is capped at livenessEvery
// (10 ms) so that a stalled transfer keeps checking its peer.
//
// p2p calls Wait only after spinning and then yielding (p2p/wait.go), so a
// rank that waits long gives its core away: np > cores does not collapse.
//
// # Failure
//
// While a frame is half received, or a ring stays full, the module checks
// its peer every 10 ms: the peer's closed flags (set by its Close) and its
// process (a pidfd, readable once the process exited, zombie or not;
// kill(pid, 0) where pidfds are missing). A dead or closed peer fails
// with Handler.PeerFailed (once), its queued frames complete with the
// error, and a half-received frame is dropped without End. A peer that
// dies while nothing is in flight is the membership's to report.
//
// # Cleanup
//
// When the placement is known (btl.Env.LocalSize, from the business card)
// a rank unlinks its segment as soon as every other local rank has opened it
// (the opened word): peers keep their descriptors and map further rings
// through them, so the name is not needed any more and nothing is left
// behind even if gorun itself is killed. Peers open a segment when they
// first send to its owner or first receive from it, so in a job where some
// local pair never communicates the name stays until Close, which always
// unlinks it; after any abnormal ending gorun removes /dev/shm/gorun-<job>-*
// (launcher.RemoveSegments). A rank alone on its host does not open sm.
//
// # Single copy
//
// The module implements btl.RMA for host memory: Get and Put are
// process_vm_readv and process_vm_writev against the peer's pid (the pid
// its segment names), done inside the call (a memory copy, not a wait on
// the peer) with RMADone called before they return. Register needs no
// system call and no key: a region is its virtual address and length, and
// Get and Put check every access against the region's length (an address
// outside the peer's memory is EFAULT, an error of that operation only).
// GORUN_SM_SINGLE_COPY=none turns RMA off. At Open the module reads its
// own memory through process_vm_readv (seccomp filters in containers
// answer ENOSYS or EPERM); per peer, RMAKinds reads the peer's segment
// header from the peer's memory once and compares the magic, which catches
// Yama's ptrace_scope and foreign credentials. A refusal later (EPERM,
// EACCES, ENOSYS) fails that operation with btl.ErrRMARefused and turns
// RMA off for that peer.
//
// # Eager limit
//
// 16 KiB. An eager message costs two copies (into the ring, out of it);
// above the limit p2p's rendezvous moves the data with the split single
// copy (RMA Get and Put) after an RTS/CTS round trip. Measured on the quiet
// 16-core device host with that engine (OSU method, medians of 3
// interleaved runs; eager limit 16 KiB / 64 KiB / Open MPI):
//
//	latency µs   8K 2.81 / 2.75 / 3.37   16K 4.24 / 4.12 / 4.89
//	             32K 8.58 / 6.74 / 7.83  64K 13.9 / 13.2 / 11.5
//	bw MB/s      32K 8190 / 7239 / 8580  64K 13212 / 9210 / 8512
//
// Eager pays up to 16 KiB. Beyond, it would gain ~20% of latency at 32
// KiB but lose 12-30% of bandwidth at 32-64 KiB (two ring copies against
// one single copy when many messages are in flight), and every unexpected
// eager message is buffered whole at the receiver. Open MPI's vader uses
// 4 KiB. GORUN_SM_EAGER_LIMIT overrides it.
//
// # Concurrency
//
// As package btl says: every method but Close is called with the engine's
// lock held; the module starts no goroutines. Handler callbacks run from
// Progress (Begin and End, PeerFailed) or Send (FrameDone, PeerFailed).
package sm
