package mpi

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorun/gorun/p2p"
	"golang.org/x/sys/unix"
)

// One-sided communication (MPI-3 §11, RMA windows).
//
// A Win[T] exposes a slice of T at every rank of a communicator; any rank
// may then Put into, Get from and Accumulate into any rank's slice, inside
// an access epoch: between two Fences (active target), or between Lock and
// Unlock, LockAll and UnlockAll (passive target). Displacements and counts
// are in elements of T (MPI's disp_unit is the element size).
//
// How the bytes move. Every operation goes through the point-to-point
// engine, as active messages on a context private to the window (a Dup of
// the communicator): the origin sends a 32-byte request to the target, and
// the data, when there is any, as a second message straight from the
// origin's slice; the target receives Put data straight into its window
// and sends Get data straight from it. The data therefore moves by p2p's
// own protocols: eager copies for small transfers, and above the eager
// limit the RMA rendezvous of the route (process_vm_readv/writev between
// ranks of one host, RDMA on ofi; pipelined frames on tcp), so a large Put
// or Get is single-copy between the origin's buffer and the window on one
// host. What is not zero-copy: the target's CPU takes part in every
// operation (it matches the request and posts the data's receive or send),
// and Accumulate, GetAccumulate, FetchAndOp and CompareAndSwap land in a
// scratch buffer at the target and are applied from there. Truly one-sided
// windows (the origin reading and writing registered window memory through
// btl.RMA with no target involvement) need a one-sided API in p2p, which
// does not exist yet.
//
// Progress at the target. A target that computes and never calls MPI must
// still serve locks, puts and accumulates. Each window runs one goroutine
// per rank (from creation to Free) that polls for requests with
// Request.Test, never holding the engine's lock while it waits: it checks
// again after GORUN_RMA_POLL_MIN, doubling the interval while idle up to
// GORUN_RMA_POLL (so an idle window costs one poll a millisecond, and a
// passive-target operation at a busy target waits at most that long for
// service). Every blocking window call (Fence, Lock, Unlock, Flush, Free)
// also serves its rank's requests itself while it waits, so that active
// target synchronisation does not wait for the goroutine, and so does
// every other blocking call of the rank (a Recv, a Wait, a Barrier: p2p's
// OnIdle hooks), so that a target inside MPI answers in microseconds.
//
// Atomicity. Requests at a target are handled one at a time, under the
// window's service lock, in the order each origin sent them: every
// Accumulate (GetAccumulate, FetchAndOp, CompareAndSwap) is therefore
// atomic with respect to every other accumulate on the same window, also
// under shared locks, and an operation to the calling rank itself goes the
// same way. Put and Get are not atomic with respect to each other or to
// accumulates (MPI calls concurrent conflicting accesses erroneous).
//
// Completion. Put, Get and the accumulates return once the operation is
// started; the origin buffer (Put, Accumulate) must not be modified, and
// the result buffer (Get, GetAccumulate, FetchAndOp, CompareAndSwap) holds
// its value, only after the operation completes: at the next Fence, at
// Unlock or UnlockAll of the target, or at Flush or FlushAll. Once Flush,
// Unlock or a Fence returns, the operations are complete at the target as
// well.
//
// Failures. An operation with a target that failed is an error
// (ErrProcFailed) at the call that waits for it, never a hang: the
// engine fails every receive from a failed rank. Under gorun
// --enable-recovery a target releases the locks of origins that failed.

// LockType is a passive-target lock's kind (MPI_LOCK_EXCLUSIVE,
// MPI_LOCK_SHARED, with Open MPI's values).
type LockType int

const (
	// LockExclusive: no other rank holds any lock on the target meanwhile.
	LockExclusive LockType = 1
	// LockShared: other ranks may hold shared locks on the target too.
	LockShared LockType = 2
)

func (t LockType) String() string {
	switch t {
	case LockExclusive:
		return "exclusive"
	case LockShared:
		return "shared"
	}
	return fmt.Sprintf("LockType(%d)", int(t))
}

// Win is a window: the slice of T that each rank of a communicator exposes
// to the others' one-sided operations (MPI_Win). Make one with WinCreate or
// WinAllocate (collective), release it with Free (collective). A Win's
// methods may be called from any goroutine; this rank's calls on one
// window are serialized.
type Win[T Element] struct {
	name  string
	wc    *Comm // private duplicate of the creating communicator
	eng   *p2p.Engine
	buf   []T
	mem   []byte  // buf's bytes
	es    int     // element size
	sizes []int64 // every rank's window length, in elements
	freed atomic.Bool
	// shared: every rank's part of a WinAllocateShared window, in shm
	// (mapped here until Free); nil for other windows.
	shared [][]T
	shm    []byte
	// shLocks: a shared window's part locks, one cache line per rank
	// (lockPart).
	shLocks []byte
	// queryable: made by WinAllocateShared (SharedQuery answers); a
	// WinAllocate window may be shared too, as an implementation choice.
	queryable bool
	// expo exposes this rank's part for one-sided access; direct[t] is
	// how this rank reaches t's part that way, nil where it cannot
	// (win_direct.go).
	expo   *p2p.Exposure
	direct []*p2p.Remote
	flavor Flavor
	// oneSided: every rank has the one-sided paths on (GORUN_RMA_DIRECT),
	// agreed at creation.
	oneSided bool
	// dynamic: made by WinCreateDynamic; the memory is what Attach gave
	// (srv.regions), and buf is nil.
	dynamic bool

	// mu serializes this rank's calls on the window (the origin side).
	mu       sync.Mutex
	fence    bool    // a fence epoch is open (a Fence was called, no Lock since)
	fenceOps []int64 // requests sent to each rank in this fence epoch
	issued   []int64 // operations issued to each rank in it (requests or direct)
	// sent counts the operations sent to each rank as requests since its
	// last lock, flush or unlock: a Flush of a rank with none (only
	// direct operations, complete at the target once complete here) needs
	// no round trip.
	sent    []int64
	locks   map[int]LockType // passive-target locks this rank holds
	shmHeld map[int]LockType // those of them taken in a shared segment (win_direct.go)
	lockAll bool
	started map[int]bool // targets of the access epoch Start opened; nil: none
	posted  []int        // origins of the exposure epoch Post opened; nil: none
	exp     *exposure    // its end under way (Test, Wait); nil: not yet
	pend    []pending    // sent and posted operations not known complete
	seq     uint32

	srv    winServer
	unhook func() // removes the OnIdle hook that serves the window
}

// pending is an operation's p2p request awaited by the origin.
type pending struct {
	target int
	r      *p2p.Request
	keep   []byte // memory the request uses until it completes
	// chk, for a data operation's reply: the length that means success
	// (a target replies otherwise to operations outside its memory).
	chk winCheck
	// share: r is also the Request of a request-based operation (Rput,
	// Rget...), released once both that Request and the window are done
	// with it.
	share *rmaShare
}

// winServer is the target side of a window: the request receive it keeps
// posted, the lock state and the replies in flight. mu is held while a
// request is handled.
type winServer struct {
	mu      sync.Mutex
	hdr     [winHdrLen]byte
	req     *p2p.Request
	replies []pending
	// excl is the rank holding the exclusive lock, or -1; shared counts
	// the shared locks each rank holds; queue holds lock requests not
	// granted yet, in arrival order.
	excl   int
	shared map[int]int
	queue  []lockWait
	// fenceDone counts requests of fence epochs handled and not yet
	// accounted for by a Fence.
	fenceDone int64
	scratch   []byte
	// regions: a dynamic window's attached memory, by displacement; next
	// is the displacement the next Attach gets.
	regions []region
	next    int64
	dead    error // why the server stopped (engine closed); nil while it runs
	stop    chan struct{}
	done    chan struct{}
}

type lockWait struct {
	rank int
	typ  LockType
	tag  int
}

// WinCreate makes a window of buf at every rank of c (MPI_Win_create):
// the other ranks' operations read and write buf directly, so buf must
// stay alive (it does, through the Win) and this rank reads its window's
// content in buf, after the epoch's synchronisation. Ranks may expose
// slices of different lengths, including none. Collective over c.
func WinCreate[T Element](c *Comm, buf []T) (_ *Win[T], err error) {
	defer c.failTo(&err)
	return newWin(c, "WinCreate", buf, false, nil)
}

// sharedParts is a shared window's segment (allocShared), set on the
// window before its server starts, and what allocShared gathered.
type sharedParts[T Element] struct {
	parts    [][]T
	mem      []byte
	locks    []byte
	sizes    []int64
	oneSided bool
}

// winSizes gathers every rank's window length, n here, and whether every
// rank has the one-sided paths on (GORUN_RMA_DIRECT): the ranks must
// agree on that, since it decides collectives and lock protocols.
func winSizes(c *Comm, n int) (sizes []int64, oneSided bool, err error) {
	direct := int64(0)
	if rmaDirect() {
		direct = 1
	}
	both := make([]int64, 2*c.Size())
	if err := Allgather(c, []int64{int64(n), direct}, both); err != nil {
		return nil, false, err
	}
	sizes = make([]int64, c.Size())
	for r := range sizes {
		sizes[r] = both[2*r]
		direct &= both[2*r+1]
	}
	return sizes, direct == 1, nil
}

// newWin makes a window of buf, or a dynamic one, or one of shared parts
// (sh, with buf this rank's), for the call named op. The ranks agree
// there whether the one-sided paths are on (GORUN_RMA_DIRECT at every
// rank), since that decides collectives and lock protocols.
func newWin[T Element](c *Comm, op string, buf []T, dynamic bool, sh *sharedParts[T]) (*Win[T], error) {
	if err := c.check(op); err != nil {
		return nil, err
	}
	if err := c.intra(op); err != nil {
		return nil, err
	}
	wc, err := c.Dup()
	if err != nil {
		return nil, reop(op, err)
	}
	wc.SetName("window of " + c.name)
	var sizes []int64
	var oneSided bool
	if sh != nil {
		sizes, oneSided = sh.sizes, sh.oneSided // allocShared gathered them
	} else if sizes, oneSided, err = winSizes(wc, len(buf)); err != nil {
		wc.Free()
		return nil, reop(op, err)
	}
	w := &Win[T]{
		name:     fmt.Sprintf("window of %s", c.name),
		wc:       wc,
		eng:      c.rt.eng,
		buf:      buf,
		mem:      elemBytes(buf),
		es:       elemSize[T](),
		sizes:    sizes,
		fenceOps: make([]int64, wc.Size()),
		issued:   make([]int64, wc.Size()),
		sent:     make([]int64, wc.Size()),
		locks:    map[int]LockType{},
		shmHeld:  map[int]LockType{},
		dynamic:  dynamic,
		flavor:   FlavorCreate,
		oneSided: oneSided,
	}
	if sh != nil {
		w.shared, w.shm, w.shLocks = sh.parts, sh.mem, sh.locks
	}
	w.srv.excl = -1
	w.srv.shared = map[int]int{}
	w.srv.stop = make(chan struct{})
	w.srv.done = make(chan struct{})
	if err := w.post(); err != nil {
		wc.Free()
		return nil, wrap(op, err)
	}
	go w.serveLoop()
	// A rank blocked in any call serves the window meanwhile (p2p's
	// OnIdle): requests wait microseconds, not the poller's sleep.
	w.unhook = w.eng.OnIdle(func() { w.serveAs(true) })
	if err := w.exposeDirect(op); err != nil {
		w.Free()
		return nil, err
	}
	return w, nil
}

// WinAllocate makes a window of n zeroed elements at this rank
// (MPI_Win_allocate); Local returns them. Collective over c.
//
// When every rank of c runs on one host (and GORUN_RMA_DIRECT is not 0
// at any of them), the parts are allocated in one shared-memory segment,
// as WinAllocateShared does (Open MPI's osc/sm does the same), so that
// other ranks' Put and Get are plain copies; without shared memory for
// it (ErrNoMem) each rank's part is private memory. Local's slice is then
// unmapped by Free: it must not be used after Free.
func WinAllocate[T Element](c *Comm, n int) (_ *Win[T], err error) {
	defer c.failTo(&err)
	if c.check("WinAllocate") == nil && !c.IsInter() && c.Size() > 1 && c.cc.Nodes == 1 {
		w, err := allocShared[T](c, n, "WinAllocate")
		if err == nil {
			w.flavor = FlavorAllocate
		}
		if !errors.Is(err, ErrNoMem) && !errors.Is(err, errNotOneSided) {
			return w, err
		}
	}
	if n < 0 {
		return nil, errorf(ErrArg, "WinAllocate", "negative window length %d", n)
	}
	w, err := WinCreate(c, make([]T, n))
	if err != nil {
		return nil, err
	}
	w.flavor = FlavorAllocate
	return w, nil
}

// Local is this rank's part of the window: the slice given to WinCreate,
// or the one WinAllocate made.
func (w *Win[T]) Local() []T { return w.buf }

// Size is the length, in elements, of rank's part of the window; 0 for a
// rank outside the window's communicator.
func (w *Win[T]) Size(rank int) int {
	if rank < 0 || rank >= len(w.sizes) {
		return 0
	}
	return int(w.sizes[rank])
}

// Sync makes the window's content, as other ranks' operations left it,
// visible to this rank's own loads and stores of Local (MPI_Win_sync):
// operations are applied by another goroutine (win_serve.go), and Go's
// memory model wants a synchronising event between its writes and this
// rank's reads. Fence and Unlock include it; call it after a Barrier that
// follows other ranks' Unlocks, before reading Local.
func (w *Win[T]) Sync() (err error) {
	defer w.failTo(&err)
	if err := w.live("Win.Sync"); err != nil {
		return err
	}
	w.srv.mu.Lock()
	w.srv.mu.Unlock()
	return nil
}

// Comm returns the window's communicator: a duplicate of the one it was
// made from, with the same ranks (MPI_Win_get_group's members).
func (w *Win[T]) Comm() *Comm { return w.wc }

// live checks w for operation op.
func (w *Win[T]) live(op string) error {
	if w == nil {
		return errorf(ErrWin, op, "nil window")
	}
	if w.freed.Load() {
		return errorf(ErrWin, op, "%s was freed", w.name)
	}
	return w.wc.check(op)
}

// Free releases the window (MPI_Win_free) once every rank has ended its
// epochs: it fails with ErrRMASync while this rank holds locks. It waits
// until every rank calls Free, so that no operation on this rank's part is
// still under way, then stops the window's service goroutine. Later calls
// on w fail with ErrWin. Collective over the window's communicator.
func (w *Win[T]) Free() (err error) {
	defer w.failTo(&err)
	const op = "Win.Free"
	if err := w.live(op); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.locks) > 0 || w.lockAll {
		return errorf(ErrRMASync, op, "%s: this rank still holds locks (Unlock or UnlockAll first)", w.name)
	}
	if w.started != nil || w.posted != nil {
		return errorf(ErrRMASync, op, "%s: this rank has a Start or Post epoch open (Complete or Wait first)", w.name)
	}
	if !w.freed.CompareAndSwap(false, true) {
		return errorf(ErrWin, op, "%s was freed", w.name)
	}
	err = w.completeAll(op, -1)
	if q, berr := Ibarrier(w.wc); berr != nil {
		err = firstErr(err, reop(op, berr))
	} else {
		w.await(q.r.Done)
		_, berr := q.Wait()
		err = firstErr(err, reop(op, berr))
	}
	w.unhook()
	close(w.srv.stop)
	<-w.srv.done
	if w.expo != nil {
		w.expo.Close() // every rank is past its operations (the barrier)
		w.expo, w.direct = nil, nil
	}
	w.srv.mu.Lock()
	if r := w.srv.req; r != nil {
		w.eng.CancelRecv(r) // fails only when a request came after all: it is dropped
		w.eng.Release(r)
	}
	w.srv.req = nil
	for _, p := range w.srv.replies {
		w.await(p.r.Done)
		w.eng.Release(p.r)
	}
	w.srv.replies = nil
	w.srv.mu.Unlock()
	if ferr := w.wc.Free(); ferr != nil {
		err = firstErr(err, reop(op, ferr))
	}
	if w.shm != nil {
		// Every rank has called Free (the barrier above): no operation on
		// this rank's mapping is under way; the others' mappings stay
		// until their own Free.
		w.buf, w.mem, w.shared, w.shLocks = nil, nil, nil, nil
		unix.Munmap(w.shm)
		w.shm = nil
	}
	return err
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// SetErrhandler sets the window's error handler
// (MPI_Win_set_errhandler), applied from now on to the errors of the
// window's calls (Put, Get, the accumulates, the synchronisation calls,
// Sync, Free). A window starts with the handler its communicator had at
// WinCreate; setting the window's leaves the communicator's alone. A
// handler made by NewErrhandler is called with the window's communicator
// (Comm), a private duplicate of the one the window was made on.
func (w *Win[T]) SetErrhandler(h *Errhandler) error { return w.wc.SetErrhandler(h) }

// Errhandler returns the window's error handler (MPI_Win_get_errhandler).
func (w *Win[T]) Errhandler() *Errhandler { return w.wc.Errhandler() }

// failTo applies the window's handler to a failed call's error (defer
// w.failTo(&err)): the handler of its private communicator.
func (w *Win[T]) failTo(err *error) {
	if *err != nil && w != nil && w.wc != nil {
		*err = w.wc.fail(*err)
	}
}
