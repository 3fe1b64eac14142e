package coll

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/internal/relstore"
	"github.com/gorun/gorun/internal/shmseg"
	"golang.org/x/sys/unix"
)

// Shared-memory collectives, for communicators whose ranks all run on one
// host (the family of Open MPI's coll/sm and MPICH's release/gather
// collectives): one segment per communicator that every rank maps, with a
// slot per rank and flags in cache lines of their own. A call costs its
// copies and a few cache-line transfers, where the point-to-point
// algorithms pay log2(n) rounds of matched messages.
//
// Layout: a header line, then per rank a "ready" line, a "done" line,
// two data buffers of shmSlot bytes, which the rank's shm calls use in
// turn, and for the bcasts that run ahead a "read" line and a ring of
// shmRingDepth slots (see "Bcasts that run ahead" below).
//
//	ready[r] = s<<29 | len<<2 | b
//	                   rank r entered call s, and its data for it (len
//	                   bytes, for the mismatch checks; 0 if the call has
//	                   none) is in its buffer b; one word, so that a reader
//	                   never pairs one call's number with another's length
//	                   (s: the call number's low 40 bits, see "Call
//	                   numbers in the words" below; bit 1 is shmAheadBit)
//	last[r]            the ready word r published before the one in
//	                   ready[r], written before it (same line, same
//	                   stores): a reader still in call s that finds r
//	                   already in a later call learns from it whether r
//	                   ran call s here at all (if not, the ranks disagree
//	                   about the call: mismatched counts made r run a
//	                   point-to-point algorithm, or r failed its arguments
//	                   and aborted the call), and if so r's buffer and
//	                   length for it, so that the mismatch checks hold
//	                   for a rank that ran ahead too
//	done[r]  = s       rank r finished its share of call s (reduce owners)
//
// Data of up to shmInline (24) bytes is not in the buffers but in the
// ready line itself, after the two words: one area per buffer number b
// (the parity rule holds for them as for the buffers), so that a reader
// takes the flag and the data in one cache-line transfer instead of two,
// and a writer stores into one line. Every rank agrees where a call's data
// is from the length it published (area), also where a rank writes into
// another's (the reductions' owners fold into the slots they read).
//
// s is the call's sequence number (Comm.Begin), which every rank gives to
// the same call, whether the call failed before its algorithm at some rank
// or not; flags only grow, so a check is "flag >= s" and nothing is ever
// reset. A rank writes the data of the calls it runs here into its two
// buffers in turn, and says which in its ready line.
//
// Call numbers in the words: the done, level, release and read words hold
// a call's whole number (64 bits: they never wrap). A ready word has room
// for its low 40 bits (its length field has 22: a slot is at most 1 MiB,
// GORUN_COLL_SHM_MAX's cap) and a ring stamp for its low 47, so those
// wrap, the ready words every 2^40 calls of the communicator (12.7 days at
// 1 µs a call; with 32 bits, as the numbers were until 2026-11-27, 72
// minutes, after which calls failed as mismatched or passed without
// waiting). A ready word is therefore compared with a call by the
// difference of their 40-bit numbers read as signed (afterReady: serial
// number arithmetic), right while the two are less than 2^39 calls apart:
// no rank runs that far ahead of another (calls that need nothing from a
// slower rank buffer its data: the ring's eight slots, eager messages),
// and a ready word would be that old only after 2^39 calls with no shm
// algorithm on the communicator (gathers, scatters, scans, large or
// nonblocking calls only: 6.4 days at 1 µs a call): the first blocking
// call of each epoch of 2^37 calls renews every rank's words first
// (Prepare, shmRenew). The set-up stores a word of the call before the
// first in every rank's ready line, so that the zeroed segment is never
// read as a call. A stamp is compared with its call for equality, and the
// call a slot held is taken as the latest one with the stamp's 47 bits
// (bcastAhead).
//
// Reuse of a buffer: a rank starts a shm call only once every rank has
// entered its previous one (ready >= it), hence finished the one before,
// the last that read the buffer this call writes. Most calls learn that on
// the way (seen); a rank that did not polls the ready lines. A rank is
// therefore never more than one call of the buffers ahead of any other
// (bcasts through the ring aside: below), which is why a reader that
// finds a ready line already at a later call finds what it needs in
// last, and why that buffer still holds it. (The readers of a bcast
// through the buffers write nothing, but are held to this too: a reader
// that ran ahead several calls would leave nothing to tell which buffer
// held the call a slower one reads.)
//
// Bcasts that run ahead: the rule above made every bcast a barrier of
// sorts. Its root waited for every rank to enter the previous call
// before it wrote, so that a root that computes between bcasts waited
// for the slowest reader of the last one, and back-to-back bcasts of 8 B
// at np=4 on the 2-core VM took 11-19 µs a call against Open MPI's 0.7-3
// (its root writes eager messages into fifos and goes on; now 2.7-3.5,
// coll/MEASUREMENTS.md). A bcast of up to GORUN_COLL_SHM_AHEAD
// bytes therefore goes through a ring instead: every rank has
// shmRingDepth slots, each a stamp word (s<<17 | len) and the data: in
// the stamp's own line for up to 56 bytes (one transfer brings both),
// else from the next line on (so that the readers polling the stamp do
// not pull its line away from the root while it copies). The root of call s
// writes slot s mod depth and its stamp, then publishes its ready word,
// without waiting for anyone; before it overwrites a slot it waits until
// every other rank is done with the call t the slot held: it stored t (or
// a later call) in its "read" word, the first word of a line before its
// ring, which every reader of a bcast stores when it leaves the call,
// read or failed (also one whose count, above the limit, took it through
// the buffers: a mismatch); or, a rank that failed t before its
// algorithm, it entered a later shm call. All of them usually have: t was depth calls of the
// communicator ago. (Entering a later call alone would not do: a rank
// whose calls since t ran no shm algorithm, such as scatters, shows t
// until it enters this one, and the root would wait for it as if every
// bcast were a barrier. The read word is not the done word: that says
// which call a reduce owner has folded, and a reader storing a later call
// there would pass for an owner of a call it failed.) The others publish
// theirs, wait for the stamp, copy, and store s in their read word. Such
// a call that follows another one starts without waiting for it (the
// ring is not the two buffers, and its readers write only their read
// word), so a rank may be several calls ahead of another, but only
// through these calls: their ready words carry
// shmAheadBit and leave last alone (publishAhead), so that last keeps
// the rank's latest call of the buffers. The first of them after a call
// of the buffers waits as any call does (it moves that call into last,
// and a slower rank may still need the one before, as in the back-to-
// back reduce, where the non-roots leave at once), and every call of the
// buffers after them waits for every rank to enter the last of them,
// hence to finish all before. A rank whose count made it
// pick the other kind of bcast than the root finds a record of the wrong
// kind for the call and fails it as a mismatch, as for any other
// disagreement.
//
// Nonblocking calls run here too, each in its turn: in the order the
// calls began, as blocking calls do by themselves (nbturn.go). Two
// blocking calls at once on one communicator (from two goroutines:
// erroneous in MPI) fail with an error instead of corrupting each other.
//
// Set-up, at a communicator's first blocking call of any collective
// (Prepare, which package mpi calls at every rank, whatever the call and
// whether its arguments are good or not): rank 0 creates the segment
// (/dev/shm/gorun-<job>-coll-<ctx>-<world rank>, removed by gorun's reaper
// whatever happens), with slots of shmSlot bytes, or half that, and so
// on down to shmFloor, the first size within shmBudget (an eighth of
// /dev/shm's free space) that /dev/shm can hold (the calls larger than
// the slot run their point-to-point algorithms), the others map it,
// every rank reports whether it could, and rank 0 unlinks the file. If
// any rank failed, the communicator never uses shm and its calls run
// their point-to-point algorithms, on every rank alike.
//
// The set-up must end the same way at every rank, and two things once
// made it differ when a call failed at some ranks only. It ran at the
// first call that picked an shm algorithm, so a rank whose arguments were
// wrong (checked before the pick) did not run it while the others did;
// and it ran on the call's tags, which the call's abort revokes, so a rank
// could fail in it while another, already past it, kept its segment. The
// next call then ran set-up messages at some ranks against shm flags or
// point-to-point messages at others ("receive from rank 0: 0 bytes where
// 1 were expected"). Hence the set-up runs at a point that every rank
// reaches alike, whatever its arguments and before any pick, and on a
// channel of its own (setupIn) that aborts do not revoke: once every
// rank has entered it, it completes everywhere. The price: every
// communicator within one host that makes a blocking call gets a segment,
// even one whose calls are all too large for it or of collectives without
// an shm algorithm. And the set-up waits for every rank: where a rank
// makes a nonblocking call and the others their first blocking one (an
// erroneous program: MPI forbids the two to match), they wait in the
// set-up until that rank makes a blocking call, dies, or the communicator
// is revoked; a call's own algorithm would have failed on the stray
// messages instead.

var (
	pShm = params.Int("GORUN_COLL_SHM", 1,
		"1: shared-memory collectives (barrier, bcast, reduce, allreduce, allgather, alltoall) for blocking calls on communicators within one host; 0: point-to-point algorithms only")
	pShmMax = params.Int("GORUN_COLL_SHM_MAX", 1<<20,
		"largest message (per rank for allgather; all blocks for alltoall) that the shared-memory collectives take on 4 ranks or more (on 2 and 3, at most 64 KiB): the slot size of their segment, less where the segment would pass GORUN_COLL_SHM_SEGMENT or an eighth of the free space of /dev/shm; at most 1 MiB")
	pShmAllRead = params.Int("GORUN_COLL_SHM_ALLREAD", 16<<10,
		"shared-memory allreduce and reduce on up to 8 ranks: up to this many bytes of message times ranks, every rank that wants the result reads all contributions and folds them itself (one round of cache-line transfers); above, owners fold segments and the others copy the result; 0: never")
	shmAllRead = sync.OnceValue(pShmAllRead)
	pShmAhead  = params.Int("GORUN_COLL_SHM_AHEAD", 1024,
		"largest shared-memory bcast in bytes whose root writes and goes on without waiting for the previous call's readers: a ring of 32 slots per rank, 64 + 32 x (64 + this, in whole lines) bytes of each communicator's segment per rank; at most 64 KiB; must be the same in every process; 0: no ring")
	pShmSegMax = params.Int("GORUN_COLL_SHM_SEGMENT", 128<<20,
		"most bytes of slots (two a rank) in a communicator's shared-memory segment: where n ranks' slots would pass it, the slot halves (down to 4 KiB); the segment takes that much of /dev/shm (memory) from the communicator's first blocking call to its end; must be the same in every process")
	shmSegMax = sync.OnceValue(pShmSegMax)
	shmAhead  = sync.OnceValue(func() int { return min(max(pShmAhead(), 0), 64<<10) })
	// Read once: every collective call's pick asks (shmApplies), and a
	// parameter read is an environment lookup.
	shmOn  = sync.OnceValue(func() bool { return pShm() != 0 })
	shmMax = sync.OnceValue(func() int {
		s := min(max(pShmMax(), line), 1<<20) // within a ready word's length field
		return (s + line - 1) &^ (line - 1)
	})
)

// jobID names this job's segments; SetJob sets it.
var jobID string

// SetJob tells the package the job's id, which names its shared-memory
// segments (gorun removes /dev/shm/gorun-<job>-* when the job ends).
func SetJob(id string) { jobID = id }

// Job returns the job's id as SetJob set it.
func Job() string { return jobID }

const line = 64

// shmSlot is the data buffer size for n ranks: GORUN_COLL_SHM_MAX, at
// most shmSmallSlot below shmBigRanks ranks, less for large n so that a
// segment's n*2 slots stay within GORUN_COLL_SHM_SEGMENT (128 MiB: 1 MiB
// slots up to 64 ranks; see below for why not 64 MiB). The set-up takes less still
// when that would pass shmBudget or /dev/shm cannot hold it (shmSetup),
// down to shmFloor(n).
//
// Up to 1 MiB from 4 ranks on (it was 64 KiB at every size): on the lent
// 32-core Intel host, against Open MPI in the same calls (medians of 3,
// bench/results/shmslot-2026-11-28-32core.txt), the point-to-point
// algorithms that took over above 64 KiB cost 2 to 15 times the shared-
// memory ones' time there (bcast of 128 KiB at np=32: 223 µs against 34;
// Open MPI 165), and bcast of 1 MiB at np=16 took 1.5x Open MPI's time,
// 0.54x in shared memory; allreduce, reduce, allgather and alltoall of
// 128 KiB-1 MiB went from up to 1.4x (allgather np=32 up to 1.6x) to
// 0.2-1.1x. At np=2 the point-to-point algorithms win there (a single
// copy between the two processes, where shared memory copies twice:
// bcast of 1 MiB 40 µs against 171), hence shmBigRanks.
//
// The segment's cap was 64 MiB, which at np=64 made the slot 512 KiB, so
// that alltoall of 16 KiB blocks (1 MiB a rank) left shared memory for the
// point-to-point algorithm: 1.74-1.94x Open MPI's time in three calls on
// the lent 64-core host, where 8 KiB ran at 0.7x. With 128 MiB (1 MiB
// slots) it took 602-879 µs against 1736 (median) and Open MPI's 821-1022
// (0.71x), medians of 3 (bench/results/alltoall-np64-2026-11-28-64core.txt);
// single copy for those blocks instead (the linear algorithm's sends
// synchronous: rendezvous, process_vm_readv) and the pairwise algorithm
// took as long as the eager linear one there. The calls of 1 MiB, which
// the 512 KiB slot had sent to the point-to-point algorithms, gained too:
// bcast 1557 -> 414 µs (0.22x Open MPI's), allreduce 1163 -> 785 (0.55x),
// allgather 54.6 -> 36.4 ms (0.62x; bench/results/shmslot-np64-2026-11-28-64core.txt).
// The price is memory: the segment is backed in /dev/shm when it is
// made, n x 2 MiB (66-128 MiB) for each communicator of 33 to 64 ranks
// on a host that makes a blocking call, where it was at most 64 MiB,
// within an eighth of /dev/shm's free space as before (shmBudget).
func shmSlot(n int) int { return shmSlotOf(n, shmMax(), shmSegMax()) }

// shmSlotOf is shmSlot with GORUN_COLL_SHM_MAX (in whole lines) and
// GORUN_COLL_SHM_SEGMENT given.
func shmSlotOf(n, s, segMax int) int {
	if n < shmBigRanks {
		s = min(s, shmSmallSlot)
	}
	for s > shmLeastSlot && n*2*s > segMax {
		// Whole lines, never under 4 KiB: halving a GORUN_COLL_SHM_MAX
		// that is no power of two would leave the ready words after an
		// odd rank's slots off their 8-byte alignment.
		s = max(s>>1&^(line-1), shmLeastSlot)
	}
	return s
}

// shmLeastSlot is the least slot that shmSlot halves down to.
const shmLeastSlot = 4 << 10

// shmSmallSlot is the slot below shmBigRanks ranks, and the least one the
// set-up settles for when /dev/shm is short (shmFloor).
const shmSmallSlot = 64 << 10

// shmBigRanks is the least number of ranks whose segment gets slots
// above shmSmallSlot.
const shmBigRanks = 4

// shmBudget is the most a communicator's segment takes of /dev/shm (but
// one of the least slot, shmFloor): an eighth of its free space when the
// segment is made, so that the segments of many communicators, or a
// container's small /dev/shm (64 MiB by default), leave room for the
// shared-memory transport's rings, shared windows and the communicators
// to come (each takes at most an eighth of what the ones before left).
func shmBudget() int {
	if f := shmseg.Free(); f < math.MaxInt {
		return f / 8
	}
	return math.MaxInt
}

// shmFloor is the least slot the set-up takes for n ranks before it
// gives shared memory up: shmSmallSlot, or shmSlot(n) if smaller.
func shmFloor(n int) int { return min(shmSlot(n), shmSmallSlot) }

// shmSeg is a communicator's mapped segment.
type shmSeg struct {
	mem    []byte
	n      int
	slot   int
	stride int
	ring   int     // the stride of a ring slot: the stamp's line, then GORUN_COLL_SHM_AHEAD bytes in whole lines
	next   uint64  // the buffer this rank's next shm call writes
	prev   uint64  // this rank's previous shm call
	pub    uint64  // the ready word this rank published last
	seen   uint64  // every rank is known to have entered call seen
	epoch  uint64  // the epoch of the last renewal (shmRenew); 0 at the set-up
	busy   uint64  // 1 while a call runs on the segment (shmBegin, end)
	call   shmCall // the call in progress (busy)
	radix  int     // the reduction tree's (shmtree.go)
	diss   bool    // the barrier runs in rounds (disseminate)
}

func (g *shmSeg) rank(r int) int { return line + r*g.stride }

func (g *shmSeg) word(r, off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&g.mem[g.rank(r)+off]))
}

func (g *shmSeg) ready(r int) *uint64 { return g.word(r, 0) }
func (g *shmSeg) done(r int) *uint64  { return g.word(r, line) }

// buf returns rank r's data buffer b.
func (g *shmSeg) buf(r int, b uint64) []byte {
	off := g.rank(r) + 2*line + int(b&1)*g.slot
	return g.mem[off : off+g.slot : off+g.slot]
}

// shmInline is the largest data that rides in the ready line: two areas
// of 24 bytes after its two words.
const shmInline = 24

// area returns where rank r's size bytes of data for a call on buffer b
// are: the ready line's area b for up to shmInline bytes, else buffer b.
func (g *shmSeg) area(r int, b uint64, size int) []byte {
	if size <= shmInline {
		off := g.rank(r) + 16 + int(b&1)*shmInline
		return g.mem[off : off+size : off+size]
	}
	return g.buf(r, b)
}

// publish says that this rank entered call s with size bytes in buffer b.
func (g *shmSeg) publish(me int, s, b uint64, size int) {
	g.publishWord(me, s<<readySeq|uint64(size)<<readyLen|b)
}

// publishWord stores v in this rank's ready word, and the word it
// replaces in last, except when both are bcasts through the ring: last
// keeps the latest call of the buffers, which a slower rank may still
// read ("Bcasts that run ahead").
func (g *shmSeg) publishWord(me int, v uint64) {
	if v&g.pub&shmAheadBit == 0 {
		// A release store: the ready word's store below, to the same
		// line, is the fence, and a reader that sees the new ready word
		// sees this one (stores stay in order), as data reads it.
		relstore.Store64(g.word(me, 8), g.pub)
	}
	atomic.StoreUint64(g.ready(me), v)
	g.pub = v
}

// A ready word: the call number's low 40 bits from bit readySeq, the
// length from bit readyLen (22 bits: a slot is at most 1 MiB),
// shmAheadBit, and the buffer in bit 0.
const (
	readySeq = 24
	readyLen = 2
	// shmAheadBit marks a ready word of a bcast that ran ahead (its data
	// is in the root's ring, not in a buffer).
	shmAheadBit = 1 << 1
)

// afterReady reports whether ready word v is of call t or a later one:
// the difference of their 40-bit numbers, read as signed, is not
// negative (see "Call numbers in the words").
func afterReady(v, t uint64) bool { return int64(v&^(1<<readySeq-1)-t<<readySeq) >= 0 }

// readySize is the length in ready word v.
func readySize(v uint64) int { return int(v >> readyLen & (1<<(readySeq-readyLen) - 1)) }

// readyOf reports whether ready word v is of call s.
func readyOf(v, s uint64) bool { return (v^s<<readySeq)>>readySeq == 0 }

// A ring slot's stamp: the call number's low 47 bits from bit stampSeq,
// the length below (at most 64 KiB).
const (
	stampSeq = 17
	stampLen = 1<<stampSeq - 1
)

// stampOf reports whether stamp v is of call s.
func stampOf(v, s uint64) bool { return (v^s<<stampSeq)>>stampSeq == 0 }

// publishAhead says that this rank entered call s, a bcast of size bytes
// through the ring.
func (g *shmSeg) publishAhead(me int, s uint64, size int) {
	g.publishWord(me, s<<readySeq|shmAheadBit|uint64(size)<<readyLen)
}

// shmRingDepth is the number of ring slots a rank has: a root may run up
// to this many calls of the communicator (the slot is the call's
// sequence number mod depth) ahead of its slowest reader. With 8, back-
// to-back bcasts of 8 B at np=4 on the 2-core VM (bench/colldist, 20,000
// calls) took 0.73-1.05 µs a call against Open MPI's 0.37: one call in
// ten waited ~4.5 µs for a reader to be scheduled before the root could
// reuse a slot; with 16 0.54-0.84, with 32 0.44 (twice), with 64
// 0.37-0.42. osu_bcast (a barrier between calls) and np=2 unchanged. A
// slot is 64 + GORUN_COLL_SHM_AHEAD bytes (1088 by default: 35 KiB a
// rank).
const shmRingDepth = 32

// shmRingInline is the most data that shares the stamp's line.
const shmRingInline = line - 8

// ringSlot returns rank r's ring slot for call s: its stamp word, and
// where m bytes of data are.
func (g *shmSeg) ringSlot(r int, s uint64, m int) (*uint64, []byte) {
	off := g.rank(r) + 2*line + 2*g.slot + line + int(s%shmRingDepth)*g.ring
	at := off + 8
	if m > shmRingInline {
		at = off + line
	}
	return (*uint64)(unsafe.Pointer(&g.mem[off])), g.mem[at : at+m : at+m]
}

// read is rank r's read word: the last bcast through a ring it left.
func (g *shmSeg) read(r int) *uint64 { return g.word(r, 2*line+2*g.slot) }

// entered reports whether rank r has entered call s.
func (g *shmSeg) entered(r int, s uint64) bool { return afterReady(atomic.LoadUint64(g.ready(r)), s) }

// finished reports whether rank r has finished its share of call s.
func (g *shmSeg) finished(r int, s uint64) bool { return atomic.LoadUint64(g.done(r)) >= s }

// data returns rank r's buffer for call s, which r has entered, and the
// length it published; ok is false when r went past call s without
// publishing it here.
func (g *shmSeg) data(r int, s uint64) (b []byte, size int, ok bool) {
	v := atomic.LoadUint64(g.ready(r))
	if !readyOf(v, s) {
		// r is in a later call, and last holds its latest call of the
		// buffers, which it cannot replace before this rank enters a
		// later call (a call of the buffers waits for that, and so does
		// a bcast through the ring that follows one; later ones leave
		// last alone): last is stable. Its length is
		// checked as any other: a rank that failed the call on a
		// mismatched count and ran ahead must not pass for one whose
		// count agreed.
		v = atomic.LoadUint64(g.word(r, 8))
		if !readyOf(v, s) {
			return nil, 0, false
		}
	}
	if v&shmAheadBit != 0 {
		return nil, 0, false // r ran call s as a bcast through its ring
	}
	size = readySize(v)
	return g.area(r, v&1, size), size, true
}

// shmShared is a communicator's shm state (in shared).
type shmShared struct {
	mu sync.Mutex // held by the set-up and close
	// tried is set once the set-up has run (whatever its outcome): every
	// blocking call reads it, without the lock.
	tried atomic.Bool
	seg   atomic.Pointer[shmSeg] // nil: not usable
}

func (m *shmShared) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.seg.Swap(nil); g != nil {
		unix.Munmap(g.mem)
	}
}

// shmApplies reports whether a call of size bytes may run in shared
// memory: a blocking call on a communicator within one host, small enough
// for its segment's slots. Before the set-up has run (a caller of this
// package's entry points that picks before Prepare: package mpi prepares
// first) the slot is not known yet, and only what any segment holds
// (shmFloor) applies; every rank reaches the same call in the same state.
func shmApplies(c *Comm, a *Args, size int) bool {
	if c.sh == nil || c.Nodes != 1 || c.Size() < 2 || !shmOn() {
		return false
	}
	if a.Nonblocking && (!a.ShmReady || len(c.World) != len(c.sh.world)) {
		return false // see nbturn.go
	}
	m := &c.sh.shm
	if !m.tried.Load() {
		return size <= shmFloor(c.Size())
	}
	g := m.seg.Load()
	return g != nil && size <= g.slot
}

// errConcurrent: two blocking collectives at once on one communicator.
var errConcurrent = errors.New("two collective calls at once on one communicator (from different goroutines): MPI requires them to be ordered")

// Prepare readies c, a view begun for a blocking call, for the call's
// algorithm: at the communicator's first blocking call it sets up the
// shared-memory segment (see "Set-up" above). Package mpi calls it at
// every rank, whether the call's arguments turned out good or not (before
// it aborts a call for bad ones), so that every rank runs the set-up at
// the same call; after the first call it costs two atomic loads. It also
// renews the segment's ready words at the first blocking call of each
// epoch (shmRenew), for the same reason: every rank runs it at the same
// call. An error (a peer that failed during the set-up) is the call's.
func (c *Comm) Prepare() error {
	if c.sh == nil {
		return nil
	}
	if !c.sh.shm.tried.Load() {
		c.inTurn()
		if err := c.shmPrepare(); err != nil {
			return err
		}
	}
	if g := c.sh.shm.seg.Load(); g != nil && c.seq>>shmEpoch != g.epoch {
		c.inTurn()
		return c.shmRenew(g, c.seq)
	}
	return nil
}

// shmPrepare runs the set-up if it has not run yet.
func (c *Comm) shmPrepare() error {
	m := &c.sh.shm
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tried.Load() {
		return nil
	}
	var g *shmSeg
	var err error
	if c.Nodes == 1 && c.Size() > 1 && shmOn() {
		g, err = c.setupIn(subShmSetup).shmSetup(c.seq)
	}
	c.shmSetDone(g)
	return err
}

// shmSetDone records the set-up's outcome, g (nil: no segment). A pick
// remembered before it (a caller that picks before Prepare) assumed the
// least slot (shmApplies): every pick is made afresh from then on.
func (c *Comm) shmSetDone(g *shmSeg) {
	m := &c.sh.shm
	m.seg.Store(g)
	c.sh.forgetPicks()
	m.tried.Store(true)
}

// shmBegin returns the segment; a nil segment means "run the
// point-to-point algorithm". end must be called when the call is over.
// The set-up (and an epoch's renewal) has run already when package mpi
// made the call (Prepare); a caller of this package's entry points that
// did not call Prepare gets it here, at its shm calls, which is safe when
// every rank makes them with arguments that pick the same algorithm.
func (c *Comm) shmBegin() (*shmSeg, error) {
	c.inTurn()
	if err := c.Prepare(); err != nil {
		return nil, err
	}
	g := c.sh.shm.seg.Load()
	if g == nil {
		return nil, nil
	}
	if !atomic.CompareAndSwapUint64(&g.busy, 0, 1) {
		return nil, errConcurrent
	}
	return g, nil
}

// end lets the next call on the segment begin. A release store (what
// the call did is visible before it), not sync/atomic's, whose fence
// waited for the call's last stores to the shared lines.
func (g *shmSeg) end() { relstore.Store64(&g.busy, 0) }

// shmSetup makes and maps the segment (see the package comment above); c
// is a set-up view, and first the number of the call it runs in (the same
// at every rank). The vote decides for every rank alike; an error is a
// failure of the set-up's messages.
func (c *Comm) shmSetup(first uint64) (*shmSeg, error) {
	n := c.Size()
	ring := 0
	if m := shmAhead(); m > 0 {
		ring = line + (m+line-1)&^(line-1)
	}
	// The segment for each slot size the set-up may settle for, the
	// largest first: a /dev/shm too small for shmSlot(n) (a container's
	// 64 MiB) costs the large calls their shared-memory algorithms, not
	// every call.
	var segs []*shmSeg
	var sizes []int
	for slot := shmSlot(n); slot >= shmFloor(n); slot >>= 1 {
		stride := 2*line + 2*slot
		if ring > 0 {
			stride += line + shmRingDepth*ring // the read line, the ring
		}
		segs = append(segs, &shmSeg{n: n, slot: slot, stride: stride, ring: ring, radix: treeRadix(n), diss: useDiss(n)})
		sizes = append(sizes, line+n*stride)
	}
	path := segPath("coll", c.Ctx, uint64(c.World[0]))
	// Every rank's ready and last words start at the call before the
	// first, not at 0: a zero word is a call too, to afterReady
	// ("Call numbers in the words").
	w0 := (first - 1) << readySeq
	mem, i, why, err := c.sharedSegment(path, sizes, shmBudget, func(i int, mem []byte) {
		g := segs[i]
		g.mem = mem
		for r := range n {
			*g.ready(r), *g.word(r, 8) = w0, w0
		}
	})
	if why != nil && params.Debug() {
		if mem != nil {
			fmt.Fprintf(os.Stderr, "gorun: coll: slots of %d bytes (%d in all), not %d: %v\n", segs[i].slot, sizes[i], segs[0].slot, why)
		} else {
			fmt.Fprintf(os.Stderr, "gorun: coll: no shared-memory segment: %v\n", why)
		}
	}
	if mem == nil {
		return nil, err
	}
	g := segs[i]
	g.mem, g.pub = mem, w0
	return g, nil
}

// segPath is the path of a segment of this job: kind, then two numbers
// that make it unique (gorun's reaper removes /dev/shm/gorun-<job>-*).
func segPath(kind string, a uint32, b uint64) string {
	return filepath.Join(shmseg.Dir, "gorun-"+jobID+"-"+kind+"-"+strconv.FormatUint(uint64(a), 10)+"-"+strconv.FormatUint(b, 10))
}

// sharedSegment makes a zeroed segment that every rank of c maps, of the
// first of sizes (at most 255) that rank 0 can create within budget()
// bytes (the last size whatever the budget; nil: no budget): rank 0 creates
// path (and hands it, and the size's index i, to init, if not nil, before
// any other rank can map it), the others map it, every rank learns
// whether all could, and rank 0 unlinks the file. mem is nil at every
// rank alike when some rank could not; why is then this rank's reason
// (nil if another rank failed). At rank 0 why may also be the reason a
// larger size failed when a smaller one did not. err is a failure of the
// set-up's messages.
func (c *Comm) sharedSegment(path string, sizes []int, budget func() int, init func(i int, mem []byte)) (mem []byte, i int, why, err error) {
	me := c.Rank()
	flag := []byte{0} // 1 + the index of the size made, 0: none
	if me == 0 {
		most := math.MaxInt
		if budget != nil && len(sizes) > 1 {
			most = budget()
		}
		for i, size := range sizes {
			if size > most && i < len(sizes)-1 {
				why = fmt.Errorf("%d bytes would take more than an eighth of /dev/shm's free space (%d)", size, most*8)
				continue
			}
			m, err := shmseg.Create(path, size)
			if err != nil {
				why = err
				continue
			}
			mem, flag[0] = m, byte(i+1)
			if init != nil {
				init(i, mem)
			}
			break
		}
	}
	if err := collBcast.runFlat(c, &Args{Recv: flag, Root: 0}, nil); err != nil {
		if mem != nil {
			unix.Munmap(mem)
			unix.Unlink(path)
		}
		return nil, 0, why, err
	}
	i = int(flag[0]) - 1
	switch {
	case me == 0 || i < 0:
	case i >= len(sizes):
		why = fmt.Errorf("rank 0 made a segment of the size it tried %d-th, where this rank has %d sizes to try: the processes' environments differ (GORUN_COLL_SHM_MAX or GORUN_COLL_SHM_SEGMENT?)", i+1, len(sizes))
	default:
		mem, why = shmseg.Open(path, sizes[i])
	}
	all, err := c.allAgree(mem != nil)
	if me == 0 && mem != nil {
		unix.Unlink(path)
	}
	if err != nil || !all {
		if mem != nil {
			unix.Munmap(mem)
		}
		return nil, 0, why, err
	}
	return mem, i, why, nil
}

// ErrNoShared is the error of MapShared when some rank could not create or
// map the segment.
var ErrNoShared = errors.New("a rank could not create or map a shared-memory segment")

// MapShared is a collective of its own, run through a view begun for a
// call at every rank of a communicator within one host: it returns a
// zeroed segment of size bytes that every rank maps (package mpi's shared
// windows), named after the view's context and call. It fails with
// ErrNoShared (and this rank's reason, if it had one) at every rank alike
// when some rank could not make or map it. The caller unmaps it.
func (c *Comm) MapShared(kind string, size int) ([]byte, error) {
	// The first member's world rank too: the communicators of a Split
	// (one per color) share a context id and may run this call at once.
	mem, _, why, err := c.sharedSegment(segPath(kind+"-"+strconv.Itoa(c.World[0]), c.Ctx, c.seq), []int{size}, nil, nil)
	if err != nil || mem != nil {
		return mem, err
	}
	if why != nil {
		return nil, fmt.Errorf("%w (%d bytes): %v", ErrNoShared, size, why)
	}
	return nil, fmt.Errorf("%w (%d bytes)", ErrNoShared, size)
}

// allAgree tells every rank whether this one could set up its share of
// a communicator's state (ok), and reports whether every rank could: the
// vote that makes the set-ups of shm.go and gpuipc.go decide alike
// everywhere.
func (c *Comm) allAgree(ok bool) (bool, error) {
	votes := make([]byte, c.Size())
	if ok {
		votes[c.Rank()] = 1
	}
	if err := collAllgather.runFlat(c, &Args{Recv: votes}, nil); err != nil {
		return false, err
	}
	return !slices.Contains(votes, 0), nil
}

// shmSpinFirst is how many times shmWait checks before it registers as a
// waiter and starts idling: a count, not a time (about a microsecond
// while the line stays in this core's cache, longer if it keeps moving).
const shmSpinFirst = 256

// shmWait waits until ok(r) holds for every r in [lo, hi), polling the
// transports now and then, and failing when the call is aborted (a
// notice), when a rank it waits for has failed, or after the stall query
// found the ranks disagreeing.
func (c *Comm) shmWait(ok func(r int) bool, lo, hi int) error {
	r := lo
	for r < hi && ok(r) {
		r++
	}
	if r == hi {
		return nil
	}
	idle := c.E.Idler()
	// A short spin first: at np=2 the other rank is usually a line
	// transfer away, and registering as a waiter (two locked
	// instructions) and the idler's bookkeeping cost more than that. Not
	// where ranks outnumber cores: the rank waited for may need this CPU.
	if idle.Spins() {
		for range shmSpinFirst {
			for r < hi && ok(r) {
				r++
			}
			if r == hi {
				return nil
			}
		}
	}
	sh := c.sh
	sh.waiters.Add(1)
	defer sh.waiters.Add(-1)
	t0 := sh.tick.Load()
	for i := 1; ; i++ {
		for r < hi && ok(r) {
			r++
		}
		if r == hi {
			return nil
		}
		if i&1023 == 0 || idle.Sleeping() {
			if err := sh.check(c); err != nil {
				return err
			}
			if err := c.E.Check(c.World[r]); err != nil {
				if ok(r) {
					continue // what it did before it went is seen now
				}
				return fmt.Errorf("waiting for rank %d in shared memory: %w", r, err)
			}
			if err := c.E.Revoked(c.Ctx); err != nil {
				return err
			}
			if !c.queried && sh.tick.Load()-t0 >= 3 {
				c.queried = true
				sh.query(c)
			}
		}
		idle.Idle()
	}
}

// shmCall is one call's view of the segment.
type shmCall struct {
	c *Comm
	g *shmSeg
	s uint64 // the call's sequence number
	b uint64 // this rank's buffer for it
}

// enteredAll waits until every rank has entered call t.
func (k *shmCall) enteredAll(t uint64) error {
	g := k.g
	if g.seen >= t {
		return nil
	}
	if err := k.c.shmWait(func(r int) bool { return g.entered(r, t) }, 0, g.n); err != nil {
		return err
	}
	g.seen = t
	return nil
}

// mine returns where this rank writes size bytes of data for the call.
func (k *shmCall) mine(size int) []byte { return k.g.area(k.c.Me, k.b, size) }

// publish says this rank has entered the call, with size bytes of data.
func (k *shmCall) publish(size int) { k.g.publish(k.c.Me, k.s, k.b, size) }

// wait waits until rank r has entered the call and returns its data,
// checking the length it published against want (-1: no check).
func (k *shmCall) wait(r, want int) ([]byte, error) {
	g, s := k.g, k.s
	if err := k.c.shmWait(func(r int) bool { return g.entered(r, s) }, r, r+1); err != nil {
		return nil, err
	}
	b, size, ok := g.data(r, s)
	if !ok {
		return nil, k.skipped(r)
	}
	if want >= 0 && size != want {
		return nil, sizeMismatch(r, size, want)
	}
	return b, nil
}

// sizeMismatch is the error of a rank r that published size bytes where this
// rank has want.
func sizeMismatch(r, size, want int) error {
	return fmt.Errorf("rank %d passed %d bytes where this rank passed %d: different counts, or different collectives (%w)", r, size, want, ErrCount)
}

// skipped is the error of a call that rank r went past without running it
// in shared memory: the abort r sent if it failed the call (given a moment
// to arrive), else a count mismatch.
func (k *shmCall) skipped(r int) error {
	c := k.c
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		c.E.Progress()
		if err := c.sh.check(c); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("rank %d did not run this call in shared memory: the ranks passed mismatched counts (%w)", r, ErrCount)
}

// shmRun runs f on the segment, or fallback when the communicator has
// none.
func (c *Comm) shmRun(a *Args, f func(k *shmCall) error, fallback func(*Comm, *Args) error) error {
	return c.shmRunAfter(a, f, fallback, false)
}

// shmRunAhead is shmRun for a call that does not use the buffers (a bcast
// through the ring): it starts without waiting for the previous call when
// that one was such a call too.
func (c *Comm) shmRunAhead(a *Args, f func(k *shmCall) error, fallback func(*Comm, *Args) error) error {
	return c.shmRunAfter(a, f, fallback, true)
}

func (c *Comm) shmRunAfter(a *Args, f func(k *shmCall) error, fallback func(*Comm, *Args) error, ahead bool) error {
	g, err := c.shmBegin()
	if err != nil {
		return err
	}
	if g == nil {
		return fallback(c, a)
	}
	defer g.end()
	// The segment's own shmCall (calls on it run one at a time: busy):
	// one allocated per call (it escapes into f) was the only allocation
	// of a small collective, and the garbage collections it caused
	// delayed one call in a few thousand by 100 µs or more at np=32.
	k := &g.call
	*k = shmCall{c: c, g: g, s: uint64(c.seq), b: g.next}
	// No rank starts a call before every rank has entered this rank's
	// previous one: see "Reuse of a buffer", and "Bcasts that run ahead"
	// for the exception.
	if !ahead || g.pub&shmAheadBit == 0 {
		err = k.enteredAll(g.prev)
	}
	if err == nil {
		err = f(k)
	}
	// This rank wrote its buffer (or would have): the next call takes
	// the other one.
	g.next ^= 1
	g.prev = k.s
	return err
}

// shmEpoch: the calls of a communicator fall in epochs of 2^shmEpoch
// calls (a call's number shifted right by it), and the first blocking
// call of an epoch renews the segment's ready words (Prepare, shmRenew):
// a word is then never more than 2^37 calls older than the call that
// reads it, well within the 2^39 that afterReady reads right ("Call
// numbers in the words"). It runs where the set-up runs and as it does
// ("Set-up"), for the same reasons: at a point every rank reaches alike
// (the first version ran inside the next shm call, when this rank's
// previous one was 2^38 calls back, which a rank that had failed a call's
// arguments reckoned from an older call than the others: it renewed alone
// and waited forever), and on a channel of sequence 0 that a call's abort
// does not revoke (the second version ran on the call's tags: an abort of
// the call could end the renewal at some ranks after others had passed
// it, and their epochs differed from then on). The segment's epoch starts
// at 0 at every rank, whatever call set it up.
const shmEpoch = 37

// chShmRenew is the channel of shmRenew's barriers, of sequence 0
// (setupIn), apart from every other tag of sequence 0 and ch* of a
// call.
const chShmRenew = 8

// shmRenew stores, at call s, the call before it in this rank's ready and
// last words, as the set-up does, between two barriers through
// point-to-point messages: after the first no rank still reads a word of
// an earlier call, and after the second every rank's words are renewed,
// so the call goes on as if the segment had been set up just before it.
// Once every rank has entered it, it completes everywhere (aborts do not
// revoke its channel); the epoch advances once both barriers passed.
func (c *Comm) shmRenew(g *shmSeg, s uint64) error {
	v := c.setupIn(chShmRenew)
	if err := barrierDissemination(v, nil); err != nil {
		return err
	}
	w0 := (s - 1) << readySeq
	atomic.StoreUint64(g.word(c.Me, 8), w0)
	atomic.StoreUint64(g.ready(c.Me), w0)
	if g.ring > 0 {
		atomic.StoreUint64(g.prog(c.Me), 0) // no call's, for 2^37 calls
	}
	g.pub, g.prev, g.seen = w0, s-1, s-1
	if err := barrierDissemination(v, nil); err != nil {
		return err
	}
	g.epoch = s >> shmEpoch
	return nil
}

// barrierShm: every rank announces itself and waits for all the others,
// reading every rank's ready line, or from GORUN_COLL_SHM_DISS ranks on
// in dissemination rounds (disseminate). (Gathering at rank 0 and
// releasing through its done word was measured against the flat one on
// the 16-core host, medians of 4 interleaved runs: 1.07x its time at
// np=2, 1.24x at np=8, 0.85x at np=16 with a spread of 93%; not taken.)
func barrierShm(c *Comm, a *Args) error {
	return c.shmRun(a, func(k *shmCall) error {
		k.publish(0)
		if k.g.diss {
			return k.disseminate()
		}
		return k.barrierFlat()
	}, barrierDissemination)
}

// barrierFlat is enteredAll for a barrier, which also looks at what each
// rank published for the call, in the word it reads anyway: data (or a
// bcast's ring) means that rank runs another collective. (Before, the
// other ranks' calls failed on the mismatch, the sizes differing, and
// this rank's Barrier returned nil: every rank's entry was all it looked
// at.) A rank already past
// the call (its word is of a later one) is not looked at; nor are the
// rounds of the barrier of 64 ranks or more (disseminate).
func (k *shmCall) barrierFlat() error {
	g, s := k.g, k.s
	other, size := -1, 0
	err := k.c.shmWait(func(r int) bool {
		v := atomic.LoadUint64(g.ready(r))
		if !afterReady(v, s) {
			return false
		}
		if other < 0 && readyOf(v, s) && (readySize(v) != 0 || v&shmAheadBit != 0) {
			other, size = r, readySize(v)
		}
		return true
	}, 0, g.n)
	if err != nil {
		return err
	}
	g.seen = s
	if other >= 0 {
		return fmt.Errorf("rank %d entered this call with %d bytes, where a Barrier has none: the ranks called different collectives (%w)", other, size, ErrCount)
	}
	return nil
}

// pShmDiss: from this many ranks the shared-memory barrier runs in
// rounds (disseminate). On the lent 32-core host the rounds, one line
// transfer after another, were slower than the flat barrier's reads in
// parallel at every np from 4 to 32 (np=16: 2.16 against 1.27 µs;
// bench/results/shmbarrier-diss-2026-11-28-32core.txt), and on the 2-core
// VM at np=4 (oversubscribed) too; at np=64 on the 64-core host, where
// every line has 63 readers, they were faster: per-call medians of 2.56
// and 2.62 µs against 2.97 and 2.98 (Open MPI 4.10 and 4.31; 20,000 calls,
// bench/results/np64-colldist-2026-11-28-64core.txt). Between 33 and 63
// ranks nothing was measured cleanly (np=48: 9.3 against 13.4 µs, spreads
// of 119% and 469%): the flat barrier stays there.
var (
	pShmDiss = params.Int("GORUN_COLL_SHM_DISS", 64,
		"the shared-memory barrier on at least this many ranks runs in dissemination rounds (each rank reads one other rank's line a round) instead of every rank reading every rank's line; 0: never")
	shmDissFrom = sync.OnceValue(pShmDiss)
)

// useDiss reports whether the barrier of n ranks runs in rounds
// (shmSeg.diss, set once per segment).
func useDiss(n int) bool { f := shmDissFrom(); return f > 0 && n >= f }

// dissWord is rank r's barrier word: the last word of its done line
// (shmtree.go's level words stop below it).
func (g *shmSeg) dissWord(r int) *uint64 { return g.level(r, treeLevels+1) }

// dissBits: a barrier word holds the call's number above this many bits
// and the round below, so that it only grows, call after call (the
// call's whole 64-bit number, as the tree's level words hold it, not the
// ready words' 40 bits: no epoch renews it, and 2^58 calls are out of
// reach).
const dissBits = 6

// disseminate is the rest of a barrier in dissemination rounds, as
// barrierDissemination is between processes: in round j (from 1) this
// rank stores call s's round j in its barrier word and waits until rank
// me-2^(j-1) has stored at least as much there, that is until it has
// passed round j-1: after round j this rank knows that the 2^j ranks up
// to itself have entered the call, after the last that all have. Each
// line is read by one rank a round, where the flat barrier has every
// rank read every rank's line (n-1 readers of each line at once). The
// words only grow, so a rank that has gone on to later calls still
// satisfies an earlier round. Every rank published its ready word before
// its first round, so after the last this rank also knows every rank's
// ready word shows the call (g.seen), as enteredAll would have made sure.
func (k *shmCall) disseminate() error {
	c, g, me := k.c, k.g, k.c.Me
	mine := g.dissWord(me)
	for d, j := 1, uint64(1); d < g.n; d, j = 2*d, j+1 {
		v := k.s<<dissBits | j
		atomic.StoreUint64(mine, v)
		p := (me - d + g.n) % g.n
		w := g.dissWord(p)
		if err := c.shmWait(func(int) bool { return atomic.LoadUint64(w) >= v }, p, p+1); err != nil {
			return err
		}
	}
	g.seen = k.s
	return nil
}

// bcastShm: the root writes the buffer into its slot; the others copy it.
// Up to GORUN_COLL_SHM_AHEAD bytes, through the root's ring.
func bcastShm(c *Comm, a *Args) error {
	if m := shmAhead(); m > 0 && len(a.Recv) <= m {
		return c.shmRunAhead(a, func(k *shmCall) error { return k.bcastAhead(a) }, bcastBinomial)
	}
	return c.shmRun(a, func(k *shmCall) error {
		m := len(a.Recv)
		piped := k.g.ring > 0 && m > shmPipeChunk
		if c.Me == a.Root {
			dst := k.mine(m)
			if !piped {
				copy(dst, a.Recv)
			}
			for off := 0; piped && off < m; off += shmPipeChunk {
				hi := min(off+shmPipeChunk, m)
				copy(dst[off:hi], a.Recv[off:hi])
				relstore.Store64(k.g.prog(c.Me), k.s<<progSeq|k.b<<progBuf|uint64(hi))
			}
			k.publish(m)
			return nil
		}
		k.publish(m)
		if k.g.ring > 0 {
			// A root whose count made it run this call through its
			// ring (a mismatch, found below) must not wait for this
			// rank when it reuses the slot.
			defer atomic.StoreUint64(k.g.read(c.Me), k.s)
		}
		off := 0
		if piped {
			var err error
			if off, err = k.pipedFrom(a.Root, a.Recv); err != nil {
				return err
			}
		}
		b, err := k.wait(a.Root, m)
		if err != nil {
			return err
		}
		copy(a.Recv[off:], b[off:])
		return nil
	}, bcastBinomial)
}

// Pipelined bcast: a root of more than shmPipeChunk bytes (where the
// segment has the read lines: the ring is on) copies its data into its
// buffer a chunk at a time and stores, after each, how far it got in its
// progress word (the read line's second word: call<<progSeq | buffer<<progBuf |
// bytes), so that the other ranks copy each chunk out while it copies
// the next; it publishes its ready word once all is in, as any root does.
// A reader takes the chunks the word shows, and what is left once the
// root has entered the call (its ready word: the length check, and the
// root's buffer for a root that ran ahead or skipped the call, as for any
// read). On the lent 32-core host (bench/results/bcast-piped-2026-11-28-32core.txt,
// against the whole copy before the readers', medians of 5 rotated
// rounds): np=2 16-64 KiB 4.95-13.2 -> 4.2-12.2 µs (64 KiB: 1.03x -> 0.89-0.95x
// Open MPI's), np=4 16 KiB-1 MiB 5-16% less, np=8 and 16 within the
// spread above 128 KiB and up to 10% less below.
const (
	shmPipeChunk = 8 << 10
	progBuf      = 21 // bytes: up to 2^21-1 (a slot is at most 1 MiB)
	progSeq      = 22 // the call's low 42 bits (zeroed at each epoch: shmRenew)
)

// prog is rank r's progress word (pipelined bcast); only with the ring.
func (g *shmSeg) prog(r int) *uint64 { return g.word(r, 2*line+2*g.slot+8) }

// pipedFrom copies into dst the chunks of the root's call that its
// progress word shows, until the root has entered the call (its ready
// word) or all is copied; it returns how many bytes it copied.
func (k *shmCall) pipedFrom(root int, dst []byte) (int, error) {
	g, s := k.g, k.s
	off := 0
	for off < len(dst) {
		var done int // bytes the root's word shows for call s, 0 if none
		var v uint64
		if err := k.c.shmWait(func(r int) bool {
			v = atomic.LoadUint64(g.prog(r))
			done = progDone(v, s)
			return done > off || g.entered(r, s)
		}, root, root+1); err != nil {
			return off, err
		}
		if done <= off || g.entered(root, s) {
			return off, nil // the rest (or all) through the ready word
		}
		hi := min(done, len(dst))
		copy(dst[off:hi], g.buf(root, v>>progBuf&1)[off:hi])
		off = hi
	}
	return off, nil
}

// progDone is the bytes a progress word v shows for call s (its low 42
// bits), 0 when it is another call's.
func progDone(v, s uint64) int {
	if v>>progSeq != s<<progSeq>>progSeq {
		return 0
	}
	return int(v & (1<<progBuf - 1))
}

// bcastAhead is a bcast through the root's ring ("Bcasts that run
// ahead").
func (k *shmCall) bcastAhead(a *Args) error {
	c, g, s := k.c, k.g, k.s
	m, root := len(a.Recv), a.Root
	stamp, data := g.ringSlot(root, s, m)
	if c.Me == root {
		// The call t the slot held: every other rank must be done with
		// it (or have entered a later call, having failed t before its
		// algorithm) before it is overwritten.
		if t, ok := ringHeld(atomic.LoadUint64(stamp), s); ok && g.seen <= t {
			if err := c.shmWait(func(r int) bool {
				return r == root || atomic.LoadUint64(g.read(r)) >= t || g.entered(r, t+1)
			}, 0, g.n); err != nil {
				return err
			}
		}
		copy(data, a.Recv)
		atomic.StoreUint64(stamp, s<<stampSeq|uint64(m))
		g.publishAhead(root, s, m)
		return nil
	}
	g.publishAhead(c.Me, s, m)
	// Done with the slot, read or failed: the root may reuse it.
	defer atomic.StoreUint64(g.read(c.Me), s)
	// The root stores the stamp before its ready word: a root that
	// entered call s without the stamp did not run it through its ring.
	if err := c.shmWait(func(r int) bool { return stampOf(atomic.LoadUint64(stamp), s) || g.entered(r, s) }, root, root+1); err != nil {
		return err
	}
	v := atomic.LoadUint64(stamp)
	if !stampOf(v, s) {
		return k.skipped(root)
	}
	if size := int(v & stampLen); size != m {
		return sizeMismatch(root, size, m)
	}
	copy(a.Recv, data)
	return nil
}

// ringHeld returns the call t whose bcast slot stamp v holds, for the
// root of call s about to reuse the slot: the latest call before s with
// v's 47 bits. ok is false when the slot holds none (never used), or
// when t would be 2^30 or more calls ago (or the stamp's bits are s's,
// 2^47 calls ago): every rank has long been done with it.
func ringHeld(v, s uint64) (t uint64, ok bool) {
	if v == 0 {
		return 0, false
	}
	d := (s<<stampSeq - v&^stampLen) >> stampSeq // s - t, mod 2^47
	return s - d, d != 0 && d < 1<<30
}

// allgatherShm: every rank writes its block into its slot and copies all
// the others'.
func allgatherShm(c *Comm, a *Args) error {
	return c.shmRun(a, func(k *shmCall) error {
		blk := gatherBlock(c, a)
		mine := a.Send
		if mine == nil {
			mine = a.Recv[c.Me*blk : (c.Me+1)*blk]
		}
		copy(k.mine(blk), mine)
		k.publish(blk)
		if a.Send != nil {
			copy(a.Recv[c.Me*blk:], a.Send)
		}
		return k.fromEach(blk, func(r int, b []byte) { copy(a.Recv[r*blk:(r+1)*blk], b) })
	}, allgatherRing)
}

// alltoallShm: every rank writes its whole send buffer (n blocks) into its
// slot, then copies block Me out of every other rank's; it applies while
// the n blocks fit a slot (its shmBytes). On 4 ranks oversubscribing the
// 2-core VM the point-to-point algorithms took 4.5 to 7.5 times Open
// MPI's time (66-114 µs against 15 at 8 B-2 KiB: a message a peer, each
// waiting for its receiver to be scheduled; 19-40 µs in long runs,
// against 12-16 for this algorithm); see docs/measurements.md, "Alltoall
// in shared memory".
func alltoallShm(c *Comm, a *Args) error {
	return c.shmRun(a, func(k *shmCall) error {
		n, me := c.Size(), c.Me
		blk := len(a.Recv) / n
		all := n * blk // its shmBytes
		src := a.Send
		if src == nil {
			src = a.Recv // in place: this rank's blocks go out from a.Recv, copied before any is overwritten
		}
		copy(k.mine(all), src[:all])
		k.publish(all)
		if a.Send != nil {
			copy(a.Recv[me*blk:(me+1)*blk], a.Send[me*blk:(me+1)*blk])
		}
		return k.fromEach(all, func(r int, b []byte) { copy(a.Recv[r*blk:(r+1)*blk], b[me*blk:(me+1)*blk]) })
	}, alltoallFlat)
}

// fromEach hands every other rank's data for the call (want bytes, once
// it has entered) to take, starting from the next rank up (Me+1, Me+2,
// ... wrapping round), so that the ranks do not all read the same rank's
// slot at once; then every rank has entered the call (seen).
func (k *shmCall) fromEach(want int, take func(r int, b []byte)) error {
	n := k.g.n
	for i := 1; i < n; i++ {
		r := k.c.Me + i
		if r >= n {
			r -= n
		}
		b, err := k.wait(r, want)
		if err != nil {
			return err
		}
		take(r, b)
	}
	k.g.seen = k.s
	return nil
}

// shmSegments splits m bytes of elem-byte elements into per-owner
// segments of at least 256 bytes (whole elements), so that small buffers
// are reduced by one rank and large ones by all; it returns the segment
// length and the number of owners.
func shmSegments(m, elem, n int) (int, int) {
	unit := elem * max(1, (256+elem-1)/elem)
	per := (m + n - 1) / n
	per = (per + unit - 1) / unit * unit
	if per == 0 {
		return 0, 0
	}
	return per, (m + per - 1) / per
}

// reduce is the reduction of allreduce and reduce: every rank writes its
// contribution into its slot; owner j (j < owners) folds segment j of
// every slot, in rank order, into slot n-1 (slot r's segment becomes the
// reduction of ranks 0..r: any operation works, and every rank gets the
// same bits), then marks it done. The result is then segment j of slot
// n-1 for every j. reduce returns it once the owners are done, or nil at
// a rank that need not wait (a non-root of reduce).
func (k *shmCall) reduce(a *Args, own []byte, wantResult bool) ([]byte, error) {
	c, g, s := k.c, k.g, k.s
	n, me, m := g.n, c.Me, len(own)
	copy(k.mine(m), own)
	k.publish(m)
	per, owners := shmSegments(m, a.Elem, n)
	if me < owners {
		lo, hi := me*per, min(m, (me+1)*per)
		acc, err := k.wait(0, m)
		if err != nil {
			return nil, err
		}
		for r := 1; r < n; r++ {
			b, err := k.wait(r, m)
			if err != nil {
				return nil, err
			}
			a.Op.Apply(acc[lo:hi], b[lo:hi])
			acc = b
		}
		g.seen = s
		atomic.StoreUint64(g.done(me), s)
	}
	if !wantResult || owners == 0 {
		return nil, nil
	}
	if err := c.shmWait(func(r int) bool { return g.finished(r, s) }, 0, owners); err != nil {
		return nil, err
	}
	g.seen = max(g.seen, s) // the owners waited for every rank to enter
	return k.result(m)
}

// result is the m bytes of a reduction's result, in rank n-1's buffer for
// the call once the reduction is done.
func (k *shmCall) result(m int) ([]byte, error) {
	n := k.g.n
	res, _, ok := k.g.data(n-1, k.s)
	if !ok {
		return nil, k.skipped(n - 1)
	}
	return res[:m], nil
}

// allreduceShm: the reduction, then every rank copies the result.
func allreduceShm(c *Comm, a *Args) error { return c.shmReduction(a, -1, allreduceRecursiveDoubling) }

// reduceShm: the reduction; the root copies the result.
func reduceShm(c *Comm, a *Args) error { return c.shmReduction(a, a.Root, reduceOrdered) }

// shmReduction runs the reduction and copies the result at root (every
// rank when root < 0).
func (c *Comm) shmReduction(a *Args, root int, fallback func(*Comm, *Args) error) error {
	return c.shmRun(a, func(k *shmCall) error {
		want := root < 0 || c.Me == root
		own := a.own()
		reduce := k.reduce
		switch {
		case useTree(k.g.n, len(own)):
			reduce = k.reduceTree
		case k.g.n <= shmAllReadRanks && len(own)*k.g.n <= shmAllRead():
			return k.reduceLocal(a, own, want)
		}
		res, err := reduce(a, own, want)
		if err == nil && want {
			copy(a.Recv, res)
		}
		return err
	}, fallback)
}

// shmAllReadRanks bounds reduceLocal to communicators of at most 8 ranks:
// on the 16-core host (OSU method, medians of 4 interleaved runs against
// the owners' reduction) allreduce of 8 B-2 KiB took 0.80-0.95x the time
// at np=2, 0.91-1.0x at np=8 and 1.05-1.19x at np=16.
const shmAllReadRanks = 8

// reduceLocal is the reduction of small buffers: every rank publishes
// its contribution, and each rank that wants the result reads every
// slot and folds them itself, in rank order (so every rank gets the same
// bits), into a.Recv. One round of cache-line transfers, where reduce's
// owners add two more (the owner's result, then its done word) on the
// way; the price is n-1 reads of len(own) bytes per rank, hence the
// bound GORUN_COLL_SHM_ALLREAD on len(own)*n.
func (k *shmCall) reduceLocal(a *Args, own []byte, want bool) error {
	g, m := k.g, len(own)
	copy(k.mine(m), own)
	k.publish(m)
	if !want || m == 0 {
		return nil
	}
	dst := a.Recv[:m]
	b, err := k.wait(0, m)
	if err != nil {
		return err
	}
	copy(dst, b[:m])
	o3, op3 := a.Op.(Op3)
	var scratch *[]byte
	if !op3 {
		// foldInto writes its second operand: b is another rank's slot.
		scratch = Scratch(m)
		defer ReleaseScratch(scratch)
	}
	for r := 1; r < g.n; r++ {
		b, err := k.wait(r, m)
		if err != nil {
			return err
		}
		if op3 {
			o3.Apply3(dst, b[:m], dst) // dst = dst ⊕ b; b is read only
			continue
		}
		copy(*scratch, b[:m])
		foldInto(a.Op, dst, *scratch)
	}
	g.seen = max(g.seen, k.s) // every rank has entered this call
	return nil
}
