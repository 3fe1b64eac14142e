package coll

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun/gorun/internal/params"
	"github.com/gorun/gorun/internal/relstore"
	"github.com/gorun/gorun/p2p"
)

// Notices: small messages on tag 0 of a communicator's collective context
// that keep a failed or mismatched call from leaving any rank waiting
// forever. Every rank keeps one receive of them posted (AnySource) and
// every wait inside a call waits for it as well as for its own message.
//
//	abort  a rank's call failed (Comm.Abort): the others' pending waits in
//	       that call fail with an *AbortedError, and a rank that begins the
//	       call later fails at once. Each rank that takes it in revokes the
//	       call's tags in p2p (markAborted), so that the call's requests
//	       fail even where no wait of this file watches them. Later calls
//	       are unaffected (their tags are new).
//	query  a rank has waited in a call for GORUN_COLL_STALL: it asks the
//	       others which algorithm and message size they ran the call with.
//	       A rank whose answer differs (mismatched counts made the ranks
//	       pick different algorithms, or different segment counts) aborts
//	       the call for everyone with a count error; agreeing ranks stay
//	       silent. A set-up query (collective setupID) comes from a
//	       set-up that runs inside the call (Comm.setupIn) and only asks
//	       whether the call was begun: a rank in Finalize that never
//	       began it aborts it, marking the abort as Finalize's (the
//	       second byte of the abort notice). That abort, and one that a
//	       process failure caused (marked too), fail the set-up; others
//	       leave it alone.
//	tick   a process-wide watchdog sends one to itself on each
//	       communicator with a waiting call every GORUN_COLL_STALL/3, which
//	       is how a wait learns that time passes.
//
// Layout: kind (1 byte), a flag byte (abortFinalize on an abort from
// Finalize, abortFailed on one a process failure caused) and 2 spare,
// call sequence, sender's rank, then
// for abort the error class and the start of the message, for query the
// collective and algorithm and the size.

var pStall = params.Duration("GORUN_COLL_STALL", 2*time.Second,
	"how long a collective call waits before it asks the other ranks whether they run the same algorithm on the same size (mismatched counts can make them pick different ones and wait for each other forever); 0 turns the check off")

const (
	noticeAbort   = 'A'
	noticeQuery   = 'Q'
	noticeTick    = 'T'
	abortFinalize = 'F' // an abort notice's flag: abortFinalized's
	abortFailed   = 'P' // an abort notice's flag: a process failed
	noticeHdr     = 16
	noticeMax     = noticeHdr + 120
)

// setupID is the collective id of a set-up query (Comm.setupIn): it asks
// whether a call was begun, and never shows a mismatch.
const setupID = 1<<16 - 2

// AbortedError is what a call fails with when another rank of the
// communicator failed in the same call and said so (Comm.Abort).
type AbortedError struct {
	// Rank is the reporting rank in the communicator.
	Rank int
	// Class is the error class the reporting rank gave (see Abort).
	Class int
	// Reason is the start of the reporting rank's error message.
	Reason string
	// stops: a set-up inside the call cannot complete: the reporting
	// rank is in Finalize and never began the call (abortFinalized), or
	// the call failed there because a process failed (and the set-up
	// needs every rank). A set-up fails on such an abort only.
	stops bool
}

func (e *AbortedError) Error() string {
	return fmt.Sprintf("rank %d failed in this call: %s", e.Rank, e.Reason)
}

func isAborted(err error) bool {
	var ae *AbortedError
	return errors.As(err, &ae)
}

// ClassCount is the error class (MPI_ERR_COUNT, as package mpi numbers
// them) of the aborts that follow a query showing mismatched calls.
const ClassCount = 2

// callRec is what a rank ran a call with, for answering queries.
type callRec struct {
	seq       uint32
	coll, alg uint16
	size      int64 // -1: sizes legitimately differ between ranks
	from      int   // for a query: the asking rank
}

// shared is the state all calls on one communicator share.
type shared struct {
	seq  atomic.Uint64
	skip uint64 // GORUN_COLL_SEQ_SKIP (Begin)

	// The communicator as a whole (a hierarchical algorithm's phases run
	// on views of parts of it): where notices go.
	e     *p2p.Engine
	ctx   uint32
	world []int
	me    int

	mu      sync.Mutex
	ab      atomic.Pointer[p2p.Request] // posted receive of notices
	abBuf   []byte
	aborted map[uint32]*AbortedError // by call sequence
	oldest  uint32                   // no record in aborted is older (forget)
	nAbort  atomic.Int32             // len(aborted), read without the lock
	queries map[uint32]callRec       // queries about calls not begun here
	nQuery  atomic.Int32             // len(queries), read without the lock (record)
	closed  bool
	// finalizing: this rank is in Finalize's barrier (FinalizeBarrier)
	// and begins no call on the communicator any more; a query about a
	// call it has not run aborts that call (take). Set under mu.
	finalizing atomic.Bool

	hist    [64]histRec // recent calls, by seq mod 64
	waiters atomic.Int32
	tick    atomic.Uint64 // ticks received

	gpu gpuShared // GPU collectives' state (gpuipc.go)
	shm shmShared // shared-memory collectives' state (shm.go)

	// nb: the nonblocking calls running at this rank, by sequence number
	// (nbturn.go); nbN its length, read without the lock.
	nbMu sync.Mutex
	nb   []uint64
	nbN  atomic.Int32
	// unmap: the communicator was closed while nonblocking calls that
	// may use the segment ran; the last of them to land unmaps it
	// (Close, Landed).
	unmap bool

	// picks remembers each collective's last choice of algorithm on the
	// whole communicator with its inputs (select.go, pickKey).
	picks [maxColls]atomic.Uint64
}

// send sends a notice to every other rank of the communicator; fire and
// forget (it is small, hence eager; a peer that cannot be reached has its
// own error).
func (s *shared) send(msg []byte) {
	for r, w := range s.world {
		if r != s.me {
			s.e.Isend(s.ctx, w, tagNotice, msg, false)
		}
	}
}

// key is how notices and their records name call c: its number's low 32
// bits (calls in flight at once are never 2^32 apart; the records are
// forgotten long before, forgetAfter).
func (c *Comm) key() uint32 { return uint32(c.seq) }

func notice(kind byte, seq uint32, rank int) []byte {
	b := make([]byte, noticeHdr, noticeMax)
	b[0] = kind
	putU32(b[4:], seq)
	putU32(b[8:], uint32(rank))
	return b
}

// Abort tells every other rank of c that this call failed here with err,
// of error class class (the mpi package's), so that none of them waits
// forever for this rank: their pending waits in the call, and the call if
// they have not begun it yet, fail with an *AbortedError. The entry points
// do not call it themselves; their caller must when a call fails, whether
// in an algorithm or in checking its arguments after Begin. An error that
// is itself an AbortedError is not passed on.
//
// Abort also revokes the call's tags here (markAborted), and a rank that
// takes in the notice revokes them there: whatever of the call is still
// outstanding at either (a rendezvous send waiting for its CTS, a receive
// some goroutine waits on directly, a staged transfer) fails, and what
// the call's peers send later is dropped or refused. The notices go
// first, so that a peer whose send this rank refuses has the notice
// before the refusal (they travel the same route, in order).
func (c *Comm) Abort(class int, err error) {
	if isAborted(err) || len(c.World) == 1 || c.sh == nil {
		return
	}
	key := c.key()
	var flag byte
	if errors.Is(err, p2p.ErrProcFailed) {
		flag = abortFailed
	}
	c.sh.abort(key, class, err.Error(), flag)
	c.sh.mu.Lock()
	if _, ok := c.sh.aborted[key]; !ok {
		c.sh.markAborted(key, &AbortedError{Rank: c.sh.me, Class: class, Reason: err.Error(), stops: flag != 0})
	}
	c.sh.mu.Unlock()
}

// callTags is the range of tags of call seq that an abort revokes: every
// sub-channel but subNotify, the nonblocking call's notice to itself,
// which must still complete the call's request once its goroutine is done
// with the buffers.
func callTags(seq uint32) (lo, hi int) {
	lo = int(seq&seqMask) << subBits
	return lo, lo | (subNotify - 1)
}

// forgetAfter is how many calls after an aborted one its record and its
// revoked tags are forgotten: far sooner than its tags come round again
// (2^seqBits calls), far later than any rank lags behind the others.
const forgetAfter = 1 << 20

func (s *shared) abort(seq uint32, class int, reason string, flag byte) {
	msg := notice(noticeAbort, seq, s.me)
	msg[1] = flag
	putU32(msg[12:], uint32(class))
	if len(reason) > noticeMax-noticeHdr {
		reason = reason[:noticeMax-noticeHdr]
	}
	s.send(append(msg, reason...))
}

// abortRecv returns the posted receive of notices, posting it on first
// use.
func (s *shared) abortRecv() *p2p.Request {
	if r := s.ab.Load(); r != nil {
		return r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.ab.Load(); r != nil {
		return r
	}
	s.post()
	return s.ab.Load()
}

// post posts the receive of the next notice; s.mu is held.
func (s *shared) post() {
	if s.closed {
		return
	}
	s.abBuf = make([]byte, noticeMax)
	r, err := s.e.Irecv(s.ctx, p2p.AnySource, tagNotice, s.abBuf)
	if err != nil {
		return // the engine is closed: every wait fails on its own
	}
	s.ab.Store(r)
	watch(s)
}

// wait blocks until r completes or c's call is aborted; it asks the other
// ranks about the call once it has waited GORUN_COLL_STALL.
func (s *shared) wait(c *Comm, r *p2p.Request) error {
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	t0 := s.tick.Load()
	for !r.Done() {
		rs := [2]*p2p.Request{r, s.abortRecv()}
		if c.E.WaitAny(rs[:]) != 1 {
			continue
		}
		if err := s.check(c); err != nil {
			return err
		}
		if s.finalizing.Load() {
			// Finalize's barrier: the other communicators' queries
			// are answered here, on each tick (serveFinalizing).
			serveFinalizing(s)
		}
		// Three ticks are at least one stall period.
		if !c.queried && s.tick.Load()-t0 >= 3 {
			c.queried = true
			s.query(c)
		}
	}
	return nil
}

// check takes in a completed notice, if any, and reports whether c's call
// was aborted.
func (s *shared) check(c *Comm) error {
	s.takeNotices()
	if s.nAbort.Load() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ae, ok := s.aborted[c.key()]; ok {
		return ae
	}
	if c.in != 0 {
		if ae, ok := s.aborted[c.in]; ok && ae.stops {
			return ae
		}
	}
	return nil
}

// takeNotices takes in every notice that has arrived.
func (s *shared) takeNotices() {
	// Every notice that has arrived, not only the first: the receive
	// posted after one completes at once when another waits (a stall tick
	// ahead of a query would hide the query from record).
	for r := s.ab.Load(); r != nil && r.Done(); r = s.ab.Load() {
		s.mu.Lock()
		if r == s.ab.Load() {
			st, err := r.Result()
			ok := err == nil || errors.Is(err, p2p.ErrTruncate)
			if ok && st.Bytes >= noticeHdr {
				s.take(s.abBuf[:min(st.Bytes, len(s.abBuf))])
			}
			s.ab.Store(nil)
			if ok {
				s.post()
			}
		}
		s.mu.Unlock()
	}
}

// finalize marks s as the communicator of a rank in Finalize: a query
// about a call this rank has not run, come or to come, aborts that call
// (take), and its notices are received from now on (the receive is
// posted on first use otherwise, and a rank that never waited on s would
// never see a query).
func (s *shared) finalize() {
	s.mu.Lock()
	s.finalizing.Store(true)
	for seq := range s.queries { // asked before this rank got here
		if !s.begun(seq) {
			s.dropQuery(seq)
			s.abortFinalized(seq)
		}
	}
	s.mu.Unlock()
	s.abortRecv()
}

// begun reports whether this rank has begun call seq (a call's key): the
// sequence counter only grows (BeginInto). A call missing from the
// history (hist) may be one begun long ago, whose entry later calls took:
// a rank that ran far ahead of the others (a leaf of many Reduces sends
// and goes on) must not abort a call it has run because a slow rank asks
// about it after it finalized.
func (s *shared) begun(seq uint32) bool { return int32(seq-uint32(s.seq.Load())) <= 0 }

// live is every communicator's shared state from NewComm to Close: the
// watchdog ticks those where a call waits, and serveFinalizing serves
// them all (a communicator this rank never waited on included).
var (
	liveMu sync.Mutex
	live   = map[*shared]bool{}
)

func forgetLive(s *shared) {
	liveMu.Lock()
	delete(live, s)
	liveMu.Unlock()
}

// serveFinalizing marks every live communicator of this process but
// world as finalizing (posting its notice receive), once, and takes in
// their notices: a call that some ranks wait in on another communicator, and
// that this rank never began, fails for them while this rank is in
// Finalize's barrier on world (their query, answered by an abort),
// instead of both sides waiting for ever.
func serveFinalizing(world *shared) {
	liveMu.Lock()
	others := make([]*shared, 0, len(live))
	for s := range live {
		if s != world && len(s.world) > 1 {
			others = append(others, s)
		}
	}
	liveMu.Unlock()
	for _, s := range others {
		if !s.finalizing.Load() { // marked at the first tick
			s.finalize()
		}
		s.takeNotices()
	}
}

// take handles one notice; s.mu is held.
func (s *shared) take(b []byte) {
	seq, rank := getU32(b[4:]), int(getU32(b[8:]))
	switch b[0] {
	case noticeAbort:
		s.markAborted(seq, &AbortedError{Rank: rank, Class: int(getU32(b[12:])), Reason: string(b[noticeHdr:]), stops: b[1] == abortFinalize || b[1] == abortFailed})
	case noticeTick:
		s.tick.Add(1)
	case noticeQuery:
		if len(b) < noticeHdr+8 {
			return
		}
		q := callRec{seq: seq, coll: uint16(getU32(b[12:]) >> 16), alg: uint16(getU32(b[12:])), size: int64(getU64(b[noticeHdr:])), from: rank}
		// The query is stored before the history is read, and record
		// claims the history entry before it reads nQuery: whichever
		// comes second sees the other (record).
		if s.queries == nil {
			s.queries = map[uint32]callRec{}
		}
		if old, ok := s.queries[seq]; ok && q.coll == setupID && old.coll != setupID {
			q = old // a set-up query asks less than the query it would replace
		}
		s.queries[seq] = q
		s.nQuery.Store(int32(len(s.queries)))
		if h, ok := s.hist[seq%uint32(len(s.hist))].load(seq); ok {
			s.dropQuery(seq)
			if err := mismatch(h, q, s.me, rank); err != nil {
				why := err.Error()
				s.abort(seq, ClassCount, why, 0) // first: see Abort
				s.markAborted(seq, &AbortedError{Rank: s.me, Class: ClassCount, Reason: why})
			}
			return
		}
		if s.finalizing.Load() && !s.begun(seq) {
			s.dropQuery(seq)
			s.abortFinalized(seq)
			return
		}
		if len(s.queries) > 64 {
			s.dropStale(seq)
		}
	}
}

// abortFinalized aborts call seq, which this rank never ran and never
// will (it is in Finalize), for every rank: the ranks waiting in it would
// wait for ever, and this rank in Finalize's barrier for them; s.mu is
// held.
func (s *shared) abortFinalized(seq uint32) {
	why := fmt.Sprintf("rank %d called Finalize instead of this call: the ranks called different collectives", s.me)
	s.abort(seq, ClassCount, why, abortFinalize)
	s.markAborted(seq, &AbortedError{Rank: s.me, Class: ClassCount, Reason: why, stops: true})
}

// markAborted records that call seq was aborted and revokes its tags
// (callTags) in p2p with ae: the call's posted receives fail with ae, its
// unexpected messages are dropped and rendezvous offers refused, here and
// from now on; s.mu is held.
func (s *shared) markAborted(seq uint32, ae *AbortedError) {
	if s.aborted == nil {
		s.aborted = map[uint32]*AbortedError{}
	}
	old, ok := s.aborted[seq]
	if !ok {
		lo, hi := callTags(seq)
		s.e.RevokeTags(s.ctx, lo, hi, ae)
	}
	if ok && old.stops {
		// An abort that stops a set-up stays whatever comes after it:
		// a set-up inside the call fails on it alone (check), and
		// another rank's abort (its arguments were wrong) would leave
		// that set-up waiting for a rank that will never come.
		ae = old
	}
	s.aborted[seq] = ae
	s.forget(seq)
	s.nAbort.Store(int32(len(s.aborted)))
}

// forget drops the records of calls aborted forgetAfter calls or more
// before call seq, and forgets their revoked tags, before those come
// round again; s.mu is held.
func (s *shared) forget(seq uint32) {
	if seq-s.oldest < forgetAfter {
		return
	}
	s.oldest = seq
	for k := range s.aborted {
		if seq-k >= forgetAfter {
			delete(s.aborted, k)
			lo, hi := callTags(k)
			s.e.UnrevokeTags(s.ctx, lo, hi)
		} else if seq-k > seq-s.oldest {
			s.oldest = k
		}
	}
	s.nAbort.Store(int32(len(s.aborted)))
}

// refused maps err, the error of one of c's requests, to the
// *AbortedError of c's call when err is a refusal (p2p.ErrRevoked) by a
// rank that revoked the call's tags: that rank aborted the call or took
// in the notice of a rank that did, which told this rank too, though its
// notice may come after the refusal (from a third rank). It waits for that
// notice for one stall period at most (three ticks), and not at all when
// the communicator itself was revoked (no notice is coming) or the stall
// check is off (no ticks); then err stands.
func (s *shared) refused(c *Comm, err error) error {
	if !errors.Is(err, p2p.ErrRevoked) || isAborted(err) || s.e.Revoked(s.ctx) != nil {
		return err
	}
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	t0 := s.tick.Load()
	for {
		if ae := s.check(c); ae != nil {
			return ae
		}
		if pStall() <= 0 || s.tick.Load()-t0 >= 3 {
			return err
		}
		r := s.abortRecv()
		if r == nil {
			return err
		}
		r.Wait()
	}
}

// mismatch says how a query shows that two ranks ran call q.seq
// differently (an error wrapping ErrCount), or nil.
func mismatch(mine, q callRec, me, them int) error {
	if q.coll == setupID {
		return nil // the asker only wants to know the call was begun
	}
	if mine.coll == q.coll && mine.alg == q.alg && (mine.size < 0 || q.size < 0 || mine.size == q.size) {
		return nil
	}
	return fmt.Errorf("rank %d ran %s on %d bytes where rank %d ran %s on %d bytes (%w)",
		them, algName(q), q.size, me, algName(mine), mine.size, ErrCount)
}

// record notes what this rank runs call c with, and fails the call if a
// query about it arrived from a rank that runs it differently. It runs on
// every collective call and takes s.mu only when a query waits: the lock
// and the map lookup were 8% of an 8-byte allreduce at np=2 (0.23 against
// 0.21 us without them, 2-core VM). The history entry is claimed (a
// sequentially consistent compare-and-swap) before nQuery is read, and
// take stores nQuery before it reads the entry: a query that take stored
// too late to find the entry is seen here (histRec), and handled under the
// lock by whichever of the two still finds it in queries.
func (s *shared) record(c *Comm, rec callRec) error {
	rec.seq = c.key()
	s.hist[rec.seq%uint32(len(s.hist))].store(rec)
	if s.nQuery.Load() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropStale(rec.seq) // so that record's fast path comes back
	q, ok := s.queries[rec.seq]
	if !ok {
		return nil
	}
	s.dropQuery(rec.seq)
	return mismatch(rec, q, s.me, q.from)
}

// dropStale forgets the queries about calls far behind call seq: they
// will find no record here (the call failed before it, or its entry was
// overwritten). Far: 2^16 calls, not the history's 64, since a
// nonblocking collective records from its own goroutine, which may come
// late; behind, in the calls' modular order (a query about a later call
// stays). s.mu is held.
func (s *shared) dropStale(seq uint32) {
	for k := range s.queries {
		if d := seq - k; d > 1<<16 && d < 1<<31 {
			s.dropQuery(k)
		}
	}
}

// dropQuery forgets the query about call seq; s.mu is held.
func (s *shared) dropQuery(seq uint32) {
	delete(s.queries, seq)
	s.nQuery.Store(int32(len(s.queries)))
}

// histRec is an entry of shared.hist, a call this rank ran: written by
// record without s.mu, read by take (under it) and query. id packs the
// call's number, collective and algorithm (an index into the collective's
// table: 15 bits are plenty) under histValid; 0 is an empty entry and
// histBusy one being written. A writer claims the entry by swapping its
// id for histBusy (nonblocking collectives record from goroutines of
// their own, so calls seq and seq+64 may meet on one entry), stores size,
// then the new id; a reader waits out histBusy and reads id, size and id
// again. The claim is record's one fence (a compare-and-swap): it orders
// the entry's change before record's read of nQuery, and take, which
// stores nQuery before it reads id, finds either the old id (then record
// sees the query) or histBusy and then the new one.
type histRec struct {
	id, size uint64
}

const (
	histValid = 1 << 63
	histBusy  = 1
)

func (h *histRec) store(rec callRec) {
	for {
		old := atomic.LoadUint64(&h.id)
		if old != histBusy && atomic.CompareAndSwapUint64(&h.id, old, histBusy) {
			break
		}
		runtime.Gosched()
	}
	relstore.Store64(&h.size, uint64(rec.size))
	relstore.Store64(&h.id, histValid|uint64(rec.alg&0x7fff)<<48|uint64(rec.coll)<<32|uint64(rec.seq))
}

// load returns the call of number seq, if the entry holds it.
func (h *histRec) load(seq uint32) (callRec, bool) {
	for {
		id := atomic.LoadUint64(&h.id)
		if id == histBusy {
			runtime.Gosched()
			continue
		}
		size := atomic.LoadUint64(&h.size)
		if atomic.LoadUint64(&h.id) != id {
			continue // rewritten meanwhile
		}
		if id&histValid == 0 || uint32(id) != seq {
			return callRec{}, false
		}
		return callRec{seq: seq, coll: uint16(id >> 32), alg: uint16(id>>48) & 0x7fff, size: int64(size)}, true
	}
}

// query asks the other ranks how they run c's call; for a set-up view
// in a call (Comm.setupIn), whether they have begun that call.
func (s *shared) query(c *Comm) {
	// A set-up view (seq 0) asks about the call it runs in.
	key, h, ok := c.in, callRec{coll: setupID, size: -1}, c.in != 0
	if c.seq != 0 {
		key = c.key()
		h, ok = s.hist[key%uint32(len(s.hist))].load(key)
	}
	if !ok {
		return
	}
	msg := notice(noticeQuery, key, s.me)
	putU32(msg[12:], uint32(h.coll)<<16|uint32(h.alg))
	msg = msg[:noticeHdr+8]
	putU64(msg[noticeHdr:], uint64(h.size))
	s.send(msg)
}

// Poll takes in notices that have arrived and reports whether this call
// was aborted before it began here. Entry points call it first.
func (c *Comm) Poll() error {
	if c.sh == nil || len(c.World) == 1 {
		return nil
	}
	if r := c.sh.ab.Load(); r == nil || !r.Done() {
		if c.sh.nAbort.Load() == 0 {
			return nil
		}
	}
	return c.sh.check(c)
}

// Close retires the communicator's posted receive of notices (MPI's
// Comm_free): a notice to itself completes it.
func (c *Comm) Close() {
	s := c.sh
	if s == nil {
		return
	}
	forgetLive(s)
	s.gpu.close(s.world, s.me)
	// MPI lets a communicator be freed while its nonblocking calls run:
	// those that may use the segment (Launched) still do, so the last
	// of them unmaps it (Landed). Freeing must not wait for them: their
	// other ranks may need this one's later calls first.
	s.nbMu.Lock()
	later := len(s.nb) > 0
	s.unmap = later
	s.nbMu.Unlock()
	if !later {
		s.shm.close()
	}
	s.mu.Lock()
	s.closed = true
	r := s.ab.Load()
	s.mu.Unlock()
	if r != nil && !r.Done() {
		if q, err := s.e.Isend(s.ctx, s.world[s.me], tagNotice, nil, false); err == nil {
			q.Wait()
		}
		r.Wait()
	}
}

// The watchdog: one goroutine per process, started with the first
// communicator that posts its notice receive, which every
// GORUN_COLL_STALL/3 sends a tick to itself on each live communicator
// where a call is waiting (a waiting call has posted its receive).
var watchOnce sync.Once

func watch(s *shared) {
	period := pStall() / 3
	if period <= 0 || len(s.world) < 2 {
		return
	}
	watchOnce.Do(func() { go watchdog(period) })
}

func watchdog(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for range t.C {
		liveMu.Lock()
		var due []*shared
		for s := range live {
			if s.waiters.Load() > 0 && len(s.world) > 1 {
				due = append(due, s)
			}
		}
		liveMu.Unlock()
		for _, s := range due {
			if _, err := s.e.Isend(s.ctx, s.world[s.me], tagNotice, notice(noticeTick, 0, s.me), false); err != nil {
				forgetLive(s) // the engine is closed
			}
		}
	}
}

func putU64(b []byte, v uint64) {
	putU32(b, uint32(v))
	putU32(b[4:], uint32(v>>32))
}

func getU64(b []byte) uint64 { return uint64(getU32(b)) | uint64(getU32(b[4:]))<<32 }
