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
// world size), but it is sparse: a ring's memory is allocated
// (shmseg.Back) only when its sender first reaches this rank, so a full
// /dev/shm makes that Reach fall back to the next transport instead of a
// SIGBUS later.
// The rings' shape (slots, fragment) is the owner's, in its header: with
// the default shape, a /dev/shm too small for the rings of every pair of
// the host's ranks to take at most half of its free space shrinks them
// (fitSteps, from 1032 KiB down to 8 KiB), so that a container's 64 MiB
// holds 16 ranks' rings, or 32 ranks' at 24 KiB; local rank 0 says so.
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
//	  data     slots x stride bytes (stride: the fragment size + 64,
//	           rounded to 128), a byte stream of records
//	record, on a line boundary, whole lines long
//	  0 seq (stream position + 1) | 8 kind << 56, and for a frame's
//	  first record header length << 48 | frame length, for a later one
//	  its payload length | 16 the first record's header without its
//	  trailing zero bytes, then the payload
//
// # Records
//
// The data area is a byte stream wrapped around: a record at stream
// position p lies at offset p % cap (cap = slots x stride), starts on a
// line and takes whole lines, at most a stride, or, a short record or a
// pad, starts on a half line (32 bytes) and takes one. Small frames pack into consecutive lines:
// p2p's eager header has 13-14 significant bytes (p2p/header.go), so a
// frame of up to 34 payload bytes is a one-line record, and a window of
// 64 such sends fills 4 KiB that the consumer reads in order.
//
// A frame whose header and payload fit in 24 bytes (shortBody: p2p's
// messages of up to 11 bytes, zero-byte ones such as a barrier's) is a
// short record: one word, the kind, the header's and the payload's
// lengths and the position (shortWord), stored last as a seq word is,
// then the bytes; a full record that would start on the second half of a
// line (after an odd number of short ones) is preceded by a pad of half a
// line (recPad), so that a one-line record never spans two. Two short
// messages share a line, as in Open MPI's fast boxes (32-byte slots): on
// the lent 32-core host its 8-byte message rate was 1.4x its 16-byte one,
// and gorun's 8-byte rate, with a line a message, 0.65-0.91x Open MPI's. On the 2-core VM, osu_mbw_mr 1-8 B went
// from 4.0-4.2 to 5.8-6.3 M messages/s (Open MPI 7.3-8.2); on the lent
// 32-core Intel host by 7-19% only (np=2 8 B, medians over three lent
// machines: 4.30 to 4.60, 4.36 to 5.19; Open MPI 6.6-7.3), latency and
// barrier within their runs' spread
// (bench/results/msgrate-short-2026-11-27.txt). (The ring
// used to be 16 fixed slots of 64 KiB, one frame or fragment per slot:
// every small message then took the first line of a slot 64 KiB from the
// last. Measured on the quiet 16-core device host, OSU method, old and
// new interleaved, medians of 5: message rate at np=2 +8-27% for 1 B-1
// KiB and +35-59% for 2-4 KiB, bandwidth +20-65% for 2 B-8 KiB, latency
// unchanged within the noise.)
//
// A record that does not fit before the end of the data area is preceded
// by a skip record that covers the rest of the lap. A frame longer than a
// record goes in several: the first with the header and the frame's
// length, the others with their payload length.
//
// # Who writes what
//
// A ring has exactly one producer (the sender, through the mapping of the
// receiver's file it opened at Reach) and one consumer (the owner). The
// producer writes records and the full flag; the consumer writes head,
// the stream position up to which it has read. The producer publishes a
// record at position p by storing p+1 into its seq word after writing its
// meta word, header and payload; the consumer, having seen seq == head+1,
// copies the payload out and advances head past the record. It hands
// space back (stores head) at once after a record of 4 KiB or more, so
// that a large frame streams, and otherwise at the end of its poll or
// every quarter ring.
//
// The seq word where the next record will start is 0 when a record is
// published, so that the consumer, looking there next, stops until that
// record comes; a non-zero word other than head+1 or the short word of
// position head there is corruption and fails the producer. The producer
// keeps the first word of every half line zeroed up to 4 KiB past its
// tail, just after each publish (off the way of the message, and the
// lines of the records to come are then in its cache); a record that ends
// beyond that zeroes the word itself, as its first store. Space: a record needs its own bytes and the next line free
// (tail + length + 64 - head <= cap). Go's atomics are sequentially
// consistent (on amd64 the store is an XCHG, the load a plain MOV under
// TSO; on arm64 STLR/LDAR), which gives the release/acquire pairs this
// needs and the store-load order the wake protocol below needs.
//
// The consumer calls Handler.Begin at a frame's first record, copies each
// record's payload into the slice Begin returned, and calls End after the
// last. With the default shape a record carries up to 65600 bytes of
// payload with a full header (Caps.MaxFrag), so a frame of up to 64 KiB
// (every eager message, every 64 KiB rendezvous DATA) is one record; a
// ring cut to fit /dev/shm carries them in several. Frames are FIFO per sender
// because one ring carries one sender's frames in order.
//
// Send writes as many records as the ring has room for; what does not fit
// stays queued on the endpoint (back-pressure: Send never blocks) and
// Progress goes on with it. FrameDone comes once the last record is in
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
//     follows P and sees the record.
//   - M read 1, the bit was clear at L: O follows P, and the bit stays
//     set until a swap X after O returns it; the owner then polls the
//     ring after X, so after P.
//   - M read 1, the bit was set at L: only a swap clears it, so the first
//     swap X after L in S returns it; X follows P, and the poll after X
//     sees the record.
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
// Yama's ptrace_scope 2 and 3, non-dumpable peers and foreign credentials;
// a refusal is said once (a line on stderr). Under ptrace_scope 1 a
// process may read only its descendants', so each rank lets any process
// of its user attach to it (prctl PR_SET_PTRACER_ANY at Open, before its
// segment exists, withdrawn at Close), as Open MPI's vader and Charm++ do:
// for the job's life any process of the user may then ptrace a rank, as
// ptrace_scope 0 lets any; GORUN_SM_SINGLE_COPY=none keeps the
// restriction. A refusal later (EPERM, EACCES, ENOSYS: a rank made
// non-dumpable, or given another ptracer, after Init) fails that
// operation with btl.ErrRMARefused, is said once a rank, and stops single
// copy with that peer in this module; p2p then sends the refused part as
// a DATA frame through the rings (p2p/rma.go, "Refused parts go by
// frames"), so the message arrives, and asks RMAKinds again: the pair's
// later rendezvous go without RMA from the start.
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
