package p2p

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/gorun/gorun/btl"
)

// AnySource and AnyTag are the receive wildcards.
const (
	AnySource = -1
	AnyTag    = -1
)

// Engine is one rank's point-to-point engine.
type Engine struct {
	mu   engineLock // lock.go
	rank int
	mods []btl.Module
	// unopened: why the transports that did not open did not (NotOpened).
	unopened []error
	peers    []btl.Peer
	routes   []*route
	failed   []error
	closed   bool
	// revoked holds the error of each revoked context (revoke.go).
	revoked map[uint32]error
	// revTags holds the revoked tag ranges of contexts (revoketags.go).
	revTags map[uint32][]tagRange
	// anyFail holds, per context, why receives from AnySource fail
	// until acknowledged (revoke.go).
	anyFail map[uint32]error

	// mq holds each context's matching queues (matchq.go).
	mq map[uint32]*matchQ
	// lastCtx and lastQ: the context lookQ found last and its queues
	// (lastQ nil: none remembered).
	lastCtx uint32
	lastQ   *matchQ
	// nowHdr is sendNow's header: one of its own would go to the heap on
	// every message (an interface call takes its address).
	nowHdr btl.Header
	// free holds released requests for reuse (request.go).
	free   []*Request
	sends  map[uint64]*Request // rendezvous sends waiting for their CTS
	recvs  map[uint64]*Request // rendezvous receives waiting for DATA
	nextID uint64

	// cur is the frame now arriving from each peer: its matched request or
	// its unexpected entry, between Begin and End.
	cur []inflight
	// maxEager is the largest eager limit of the modules: an eager frame
	// longer than that is a protocol error (handler.go).
	maxEager int

	waiter btl.Waiter
	wait   waitPolicy
	// idleHooks: work that blocked calls do while they wait (OnIdle).
	idleHooks atomic.Pointer[[]*idleHook]
	// helpers: goroutines running work for this process's calls
	// (Helping); while any runs, waits give way to them.
	helpers atomic.Int32
	// parked: goroutines asleep until a helper's call ends (Parked).
	parked atomic.Int32
	// deferred: calls of this process not begun yet (Defer); starter
	// begins them, at the next wait's turn (giveWay).
	deferred atomic.Int32
	starter  func()
	// stager copies device memory to and from host memory for routes that
	// no RMA reaches (stage.go); nil without a GPU transport.
	stager btl.Stager
	// busies are the modules that may have work only polling completes.
	busies []btl.Busy
	// stageQ are staged sends waiting for a pinned buffer or for
	// stageOut to drop under stageMax (stage.go).
	stageQ []*staged
	// stageOut is the bytes of staged sends' chunks in flight; stageMax
	// bounds it (GORUN_P2P_STAGE_INFLIGHT; 0: no bound). stageSends are
	// the staged sends under way (releaseStaged).
	stageOut, stageMax int
	stageSends         []*staged
	// devEager is GORUN_P2P_DEVICE_EAGER.
	devEager int
}

// busy reports whether some module has work that only polling completes;
// the lock is held.
func (e *Engine) busy() bool {
	for _, b := range e.busies {
		if b.Busy() {
			return true
		}
	}
	return false
}

type route struct {
	ep btl.Endpoint
	// imm is ep's immediate send, nil if it has none (sendi.go).
	imm   btl.Immediate
	mod   btl.Module
	eager int
	// held are sends whose matched frame (EAGER, RTS) waits, in order,
	// behind an eager staged send's copy to host memory (stage.go,
	// hold): a frame that overtook it would be matched before it.
	held []*heldSend
	// rmas are the modules that move memory straight between this process
	// and the peer (RMA rendezvous), in registry order, with the kinds each
	// reaches; they need not be the module that carries the frames.
	rmas []rmaMod
}

type rmaMod struct {
	rma   btl.RMA
	kinds btl.Kinds
}

// rmaFor returns the first RMA module that reaches memory of kind k with
// the peer, or nil.
func (rt *route) rmaFor(k btl.MemKind) *rmaMod {
	for i := range rt.rmas {
		if rt.rmas[i].kinds.Has(k) {
			return &rt.rmas[i]
		}
	}
	return nil
}

type inflight struct {
	req  *Request
	u    *unexpected
	trsh []byte // scratch for a payload nobody can take (truncated, device)
	// stage is where a staged chunk lands (stage.go).
	stage *stageSlot
	// wire receives the region of an RMA RTS or CTS. Begin resets the
	// fields above only: clearing it on every frame would cost the eager
	// path.
	wire [btl.MaxRegionSize]byte
}

// unexpected is a message that arrived before its receive was posted.
type unexpected struct {
	ctx    uint32
	src    int
	tag    int
	length int
	rts    bool
	sreq   uint64
	// remote: the RTS offered an RMA rendezvous from this region; dev: the
	// sender's buffer is device memory it could not offer (fDevice).
	remote *btl.Region
	dev    bool
	data   []byte
	// failed: an eager staged message whose sender could not copy its
	// device memory (fFail); the receive that takes it fails with this.
	failed error
	// complete is false while an eager payload is still arriving; claimed
	// is the receive that matched it meanwhile.
	complete bool
	claimed  *Request
}

// Handler returns the btl.Handler that feeds this engine; pass it in the
// btl.Env of every module before calling New.
func Handler(e *Engine) btl.Handler { return (*handler)(e) }

// Alloc returns an engine for rank of size ranks, not yet attached to
// transports, so that its Handler can be handed to them.
func Alloc(rank, size int) *Engine {
	return &Engine{
		mu:     newEngineLock(),
		rank:   rank,
		peers:  make([]btl.Peer, size),
		routes: make([]*route, size),
		failed: make([]error, size),
		cur:    make([]inflight, size),
		mq:     map[uint32]*matchQ{},
		sends:  map[uint64]*Request{},
		recvs:  map[uint64]*Request{},
		wait:   defaultWaitPolicy(size),

		devEager: pDeviceEager(),
		stageMax: pStageInflight(),
	}
}

// NotOpened records why the transports that btl.OpenAll skipped did not
// open, for the error of a peer that no open one reaches.
func (e *Engine) NotOpened(errs []error) {
	e.mu.Lock()
	e.unopened = errs
	e.mu.Unlock()
}

// Attach gives the engine its modules and every peer's description. Routes
// are chosen lazily, on first use of a peer.
func (e *Engine) Attach(mods []btl.Module, peers []btl.Peer) error {
	if len(peers) != len(e.peers) {
		return fmt.Errorf("p2p: %d peers for a world of %d", len(peers), len(e.peers))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mods = mods
	copy(e.peers, peers)
	for _, m := range mods {
		e.maxEager = max(e.maxEager, m.Caps().EagerLimit)
		if st, ok := m.(btl.Stager); ok && e.stager == nil {
			e.stager = st
		}
		if b, ok := m.(btl.Busy); ok {
			e.busies = append(e.busies, b)
		}
	}
	return nil
}

// pickWaiter chooses the module a blocked call sleeps in: the one module
// implementing btl.Waiter that carries traffic to some peer. With two such
// modules in use (shared memory and TCP on a multi-host job) no single
// sleep can watch both, and waiting falls back to short sleeps.
func (e *Engine) pickWaiter() {
	var w btl.Waiter
	seen := map[btl.Module]bool{}
	for _, r := range e.routes {
		if r == nil || seen[r.mod] {
			continue
		}
		seen[r.mod] = true
		if mw, ok := r.mod.(btl.Waiter); ok {
			if w != nil {
				e.waiter = nil
				return
			}
			w = mw
		}
	}
	e.waiter = w
}

// Rank is this engine's world rank.
func (e *Engine) Rank() int { return e.rank }

// Size is the world size.
func (e *Engine) Size() int { return len(e.peers) }

func (e *Engine) route(peer int) (*route, error) {
	if r := e.routes[peer]; r != nil {
		return r, nil
	}
	rt, err := btl.Select(e.mods, e.peers[peer])
	if err != nil {
		if errors.Is(err, btl.ErrUnreachable) && len(e.unopened) > 0 {
			// Say why the transports that might have reached it are not
			// there (a tunable out of bounds, /dev/shm unusable).
			why := make([]string, len(e.unopened))
			for i, u := range e.unopened {
				why[i] = u.Error()
			}
			err = fmt.Errorf("%w (not opened: %s)", err, strings.Join(why, "; "))
		}
		return nil, err
	}
	r := &route{ep: rt.Endpoint, mod: rt.Module, eager: rt.Caps.EagerLimit}
	r.imm, _ = rt.Endpoint.(btl.Immediate)
	for _, m := range e.mods {
		if x, ok := m.(btl.RMA); ok {
			if k := x.RMAKinds(e.peers[peer]); k != 0 {
				r.rmas = append(r.rmas, rmaMod{x, k})
			}
		}
	}
	e.routes[peer] = r
	e.pickWaiter()
	return r, nil
}

func (e *Engine) nid() uint64 {
	e.nextID++
	return e.nextID
}

// Isend starts a send of the host buffer buf to world rank dst. With sync
// the send completes only once the receive has matched (MPI_Ssend).
func (e *Engine) Isend(ctx uint32, dst, tag int, buf []byte, sync bool) (*Request, error) {
	return e.IsendMem(ctx, dst, tag, btl.HostMem(buf), sync)
}

// IsendMem is Isend of any memory.
func (e *Engine) IsendMem(ctx uint32, dst, tag int, m btl.Mem, sync bool) (*Request, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.isendNew(ctx, dst, tag, m, sync)
}

// isendNew is isend into a request of the free list, given back if the
// send fails to start; the lock is held.
func (e *Engine) isendNew(ctx uint32, dst, tag int, m btl.Mem, sync bool) (*Request, error) {
	r := e.newRequest()
	if err := e.isend(r, ctx, dst, tag, m, sync); err != nil {
		r.reset()
		return nil, err
	}
	return r, nil
}

// IsendInto is IsendMem into a request the caller provides (a zero Request,
// for example a field of the caller's own request type, which saves an
// allocation per operation). The caller must not Release it.
//
// The protocol: host memory up to the route's eager limit goes eagerly
// (unless sync), and so does device memory that a module stages and no
// RMA of the route reaches, up to the smaller of that limit and
// GORUN_P2P_DEVICE_EAGER (copied to host memory first, stage.go); anything
// else by rendezvous, through RMA when the route's module reaches the
// buffer's kind, else by frames for host memory, else (device memory)
// through the host staging pipeline (stage.go); without a module that
// stages it, device memory fails with ErrNoDevicePath.
func (e *Engine) IsendInto(r *Request, ctx uint32, dst, tag int, m btl.Mem, sync bool) error {
	if r.e == nil {
		initRequest(r, e)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.isend(r, ctx, dst, tag, m, sync)
}

// isend is IsendInto with the lock held.
func (e *Engine) isend(r *Request, ctx uint32, dst, tag int, m btl.Mem, sync bool) error {
	r.ctx, r.peer, r.tag = ctx, dst, tag
	if e.closed {
		return ErrClosed
	}
	if err := e.failed[dst]; err != nil {
		return fmt.Errorf("send to rank %d: %w", dst, err)
	}
	if err := e.tagErr(ctx, tag); err != nil {
		return err
	}
	rt, err := e.route(dst)
	if err != nil {
		return fmt.Errorf("send to rank %d: %w", dst, err)
	}
	if m.Kind == btl.MemHost && !sync && len(m.Bytes) <= rt.eager {
		h := header{kind: kEager, ctx: ctx, tag: int32(tag), length: uint64(len(m.Bytes))}
		h.encode(&r.data.Hdr)
		r.data.Payload = m.Bytes
		if err := e.postMatched(rt, r, &r.data); err != nil {
			return fmt.Errorf("send to rank %d: %w", dst, err)
		}
		return nil
	}
	if m.Kind != btl.MemHost && !sync && m.N <= rt.eager && m.N <= e.devEager && rt.rmaFor(m.Kind) == nil {
		if st := e.stagerFor(m.Kind); st != nil {
			return e.eagerStaged(r, rt, st, m)
		}
	}
	return e.rendezvous(r, rt, m)
}

// rendezvous sends the RTS of r to r.peer: with our registered region when
// the route has RMA for m's kind.
func (e *Engine) rendezvous(r *Request, rt *route, m btl.Mem) error {
	dst := r.peer
	h := header{kind: kRTS, ctx: r.ctx, tag: int32(r.tag), length: uint64(m.Len())}
	if x := rt.rmaFor(m.Kind); x != nil && m.Len() > 0 {
		if err := register(r, x, m); err == nil {
			h.flags = fRMA
		} else if m.Kind != btl.MemHost && e.stagerFor(m.Kind) == nil {
			// Memory IPC cannot export (cudaMallocAsync, VMM) is staged
			// when it can be; else this is why it cannot go.
			r.devErr = fmt.Errorf("send to rank %d: register %v: %w: %w", dst, m, ErrNoDevicePath, err)
		}
	}
	if r.x == nil && m.Kind != btl.MemHost && (r.devErr != nil || e.stagerFor(m.Kind) == nil) {
		// No path: the RTS still goes, so that the receiver fails too
		// (fNoPath) instead of waiting for a message that cannot come.
		h.flags = fDevice
		r.ctl.Payload = nil
	}
	r.mem = m
	r.id = e.nid()
	h.sreq = r.id
	h.encode(&r.ctl.Hdr)
	e.sends[r.id] = r
	if err := e.postMatched(rt, r, &r.ctl); err != nil {
		e.unsend(r)
		return fmt.Errorf("send to rank %d: %w", dst, err)
	}
	return nil
}

// unsend undoes a rendezvous whose RTS did not go: r leaves the sends,
// and its registration (if any) is given back.
func (e *Engine) unsend(r *Request) {
	delete(e.sends, r.id)
	if x := r.x; x != nil {
		r.x = nil
		x.release()
		x.free()
	}
}

// Irecv posts a receive into the host buffer buf from world rank src (or
// AnySource) with tag (or AnyTag). It is IrecvMem of btl.HostMem(buf)
// without the descriptor: a btl.Mem does not fit the registers of a call
// with these arguments, and each call that passes one on copies it
// through the stack (package mpi's Irecv of host memory, the message
// rate's receive path, comes here).
func (e *Engine) Irecv(ctx uint32, src, tag int, buf []byte) (*Request, error) {
	e.mu.Lock()
	r := e.newRequest()
	r.mem.Bytes = buf
	if err := e.irecv(r, ctx, src, tag); err != nil {
		r.reset()
		e.mu.Unlock()
		return nil, err
	}
	e.mu.Unlock()
	return r, nil
}

// IrecvMem is Irecv into any memory.
func (e *Engine) IrecvMem(ctx uint32, src, tag int, m btl.Mem) (*Request, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.newRequest()
	r.mem = m
	if err := e.irecv(r, ctx, src, tag); err != nil {
		r.reset()
		return nil, err
	}
	return r, nil
}

// IrecvInto is IrecvMem into a request the caller provides, like IsendInto.
func (e *Engine) IrecvInto(r *Request, ctx uint32, src, tag int, m btl.Mem) error {
	if r.e == nil {
		initRequest(r, e)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r.mem = m
	return e.irecv(r, ctx, src, tag)
}

// irecv is IrecvInto with the lock held, r.mem set.
func (e *Engine) irecv(r *Request, ctx uint32, src, tag int) error {
	r.recv, r.ctx, r.peer, r.tag = true, ctx, src, tag
	if e.closed {
		return ErrClosed
	}
	if err := e.matchErr(ctx, src, tag); err != nil {
		return err
	}
	q := e.q(ctx)
	for i, u := range q.unexp.items() {
		if !r.wants(u.src, u.tag) {
			continue
		}
		q.unexp.remove(i)
		e.take(r, u)
		return nil
	}
	// A message that arrived before the peer failed is still received
	// (above); only then does its failure matter.
	if src != AnySource {
		if err := e.failed[src]; err != nil {
			return fmt.Errorf("receive from rank %d: %w", src, err)
		}
	}
	q.posted.push(r)
	return nil
}

// wants reports whether the receive r matches a message from src with
// tag; both are of r's context (the queues are per context).
func (r *Request) wants(src, tag int) bool {
	return (r.peer == AnySource || r.peer == src) && (r.tag == AnyTag || r.tag == tag)
}

// take hands the unexpected message u, already removed from the queue, to
// the receive r.
func (e *Engine) take(r *Request, u *unexpected) {
	r.st = Status{Source: u.src, Tag: u.tag, Bytes: u.length}
	switch {
	case u.rts:
		e.startRendezvous(r, u.src, u.length, u.sreq, u.remote, u.dev)
	case u.failed != nil:
		r.st.Bytes = 0
		r.complete(u.failed)
	case u.complete:
		e.deliverUnexpected(r, u)
	default:
		u.claimed = r
	}
}

// fill copies a whole eager message into r's host buffer, noting
// truncation (deliver stages it to device memory).
func (e *Engine) fill(r *Request, data []byte) {
	n := copy(r.mem.Bytes, data)
	if n < len(data) {
		r.trunc = len(data)
		r.st.Bytes = n
	}
}

// startRendezvous answers an RTS for r with a CTS. When the sender offered
// its region (remote) and the route has RMA for both buffers' kinds, the
// CTS carries r's region and who copies what (split), and r gets its part
// of the message while the sender puts the rest (rma.go). When neither RMA nor frames can carry the
// message (device memory on either side without RMA), the CTS says so
// (fNoPath) and both sides fail.
func (e *Engine) startRendezvous(r *Request, src, length int, sreq uint64, remote *btl.Region, devSender bool) {
	accept := length
	if n := r.mem.Len(); accept > n {
		accept = n
		r.trunc = length
	}
	r.st.Bytes = accept
	r.rndvPeer = src
	r.id = e.nid()
	e.recvs[r.id] = r
	h := header{kind: kCTS, ctx: r.ctx, length: uint64(accept), sreq: sreq, rreq: r.id}
	rt, err := e.route(src)
	if err != nil {
		delete(e.recvs, r.id)
		r.complete(err)
		return
	}
	// The module is the one the sender registered with: the first that
	// reaches the kind of its region; it must reach ours too.
	var x *rmaMod
	if remote != nil {
		x = rt.rmaFor(remote.Kind)
	}
	part := 0 // this side's part of an RMA copy
	if x != nil && accept > 0 && x.kinds.Has(r.mem.Kind) && uint64(accept) <= remote.Len {
		if register(r, x, r.mem.Slice(0, accept)) == nil {
			part = split(accept, r.mem.Kind == btl.MemDevice && remote.Kind == btl.MemDevice)
			h.flags = fRMA | ctsFlags(part, accept)
			r.x.part, r.x.accept = part, accept
			r.x.remote = *remote
			r.x.peerReq = sreq
		}
	}
	// Without RMA, device memory here is staged; a device sender stages
	// its side (it said fDevice if it cannot).
	var nopath error
	if r.x == nil && !devSender && r.mem.Kind != btl.MemHost && accept > 0 {
		if st := e.stagerFor(r.mem.Kind); st != nil {
			newStaged(r, st, src, accept)
		}
	}
	if r.x == nil && (devSender || (r.mem.Kind != btl.MemHost && r.sg == nil && accept > 0)) {
		m := r.mem
		if devSender {
			m = btl.Mem{Kind: btl.MemDevice, N: length}
		}
		nopath = fmt.Errorf("receive from %w", noPathErr(src, m, rt))
		h.flags = fNoPath
		r.ctl.Payload = nil
	}
	h.encode(&r.ctl.Hdr)
	if err := e.sendCtl(src, r, &r.ctl); err != nil {
		delete(e.recvs, r.id)
		r.complete(err)
		return
	}
	switch {
	case nopath != nil:
		delete(e.recvs, r.id)
		r.complete(nopath)
	case r.x != nil:
		e.rmaRecv(r, src, part)
	}
}

func (e *Engine) sendCtl(peer int, r *Request, f *btl.Frame) error {
	rt, err := e.route(peer)
	if err != nil {
		return err
	}
	if err := e.failed[peer]; err != nil {
		return fmt.Errorf("rank %d: %w", peer, err)
	}
	return e.post(rt, r, f)
}

// postMatched is post for a frame the receiver matches in order (EAGER,
// RTS): behind the route's held frames when it has some (stage.go).
func (e *Engine) postMatched(rt *route, r *Request, f *btl.Frame) error {
	if len(rt.held) > 0 {
		e.hold(rt, &heldSend{r: r, f: f, ready: true})
		return nil
	}
	return e.post(rt, r, f)
}

// post hands one of r's frames to the route, counting it in flight until
// its FrameDone (which may come from inside Send).
func (e *Engine) post(rt *route, r *Request, f *btl.Frame) error {
	r.frames++
	if err := rt.ep.Send(f); err != nil {
		r.frames--
		return err
	}
	return nil
}

// Release returns a completed request to the engine for reuse. The caller
// must hold no reference to it afterwards; blocking calls, which own their
// request from start to end, use it to send and receive without allocating.
func (e *Engine) Release(r *Request) {
	if r == nil || !r.done.Load() {
		return
	}
	e.mu.Lock()
	r.release()
	e.mu.Unlock()
}

// ReleaseAt is Release of *at, which it sets to nil under the lock when
// it gives the request back (see WaitReleaseAt); a request not complete
// stays where it is.
func (e *Engine) ReleaseAt(at **Request) {
	e.mu.Lock()
	if r := *at; r != nil && r.done.Load() {
		*at = nil
		r.release()
	}
	e.mu.Unlock()
}

// ReleaseAll is Release of every request of rs (nil entries and requests
// not complete are skipped) under one lock.
func (e *Engine) ReleaseAll(rs []*Request) {
	e.mu.Lock()
	for _, r := range rs {
		if r != nil && r.done.Load() {
			r.release()
		}
	}
	e.mu.Unlock()
}

// ReleaseN is Release of at(0), ..., at(n-1) under one lock; at returns
// nil for an index with nothing to release, and is called with the lock
// held (it must not call the engine).
func (e *Engine) ReleaseN(n int, at func(i int) *Request) {
	e.mu.Lock()
	for i := range n {
		if r := at(i); r != nil && r.done.Load() {
			r.release()
		}
	}
	e.mu.Unlock()
}

// release recycles r once no frame of it is in flight; the lock is held.
func (r *Request) release() {
	if r.frames == 0 {
		r.reset()
	} else {
		r.pooled = true // FrameDone of the last frame recycles it
	}
}

// forget drops r from the engine's tables (its rendezvous is over).
func (e *Engine) forget(r *Request) {
	if r.id != 0 {
		if r.recv {
			delete(e.recvs, r.id)
		} else {
			delete(e.sends, r.id)
		}
	}
}

// Iprobe reports whether a message matching (ctx, src, tag) has arrived,
// without receiving it.
func (e *Engine) Iprobe(ctx uint32, src, tag int) (bool, Status, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q, i, err := e.probe(ctx, src, tag)
	if i < 0 {
		return false, Status{}, err
	}
	u := q.unexp.items()[i]
	return true, Status{Source: u.src, Tag: u.tag, Bytes: u.length}, nil
}

// probe polls the transports once and returns ctx's queues and the index
// in their unexpected queue of the first arrived message matching (src,
// tag), or -1 with the error that stops the probe (closed, revoked, src
// failed) or nil; the lock is held. Iprobe and Improbe share it.
func (e *Engine) probe(ctx uint32, src, tag int) (*matchQ, int, error) {
	if e.closed {
		return nil, -1, ErrClosed
	}
	if err := e.matchErr(ctx, src, tag); err != nil {
		return nil, -1, err
	}
	e.progress()
	probe := Request{peer: src, tag: tag}
	if q := e.lookQ(ctx); q != nil {
		for i, u := range q.unexp.items() {
			if probe.wants(u.src, u.tag) {
				return q, i, nil
			}
		}
	}
	if src != AnySource && e.failed[src] != nil {
		return nil, -1, fmt.Errorf("probe rank %d: %w", src, e.failed[src])
	}
	return nil, -1, nil
}

// Close closes the modules. Outstanding requests fail with ErrClosed.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var first error
	for _, m := range e.mods {
		if err := m.Close(); err != nil && first == nil {
			first = fmt.Errorf("close %s: %w", m.Name(), err)
		}
	}
	for _, q := range e.mq {
		for _, r := range q.posted.items() {
			r.complete(ErrClosed)
		}
	}
	for _, rt := range e.routes {
		if rt != nil {
			e.dropHeld(rt, ErrClosed, true) // before the sends: it takes its RTSs out of them
		}
	}
	for _, r := range e.sends {
		r.complete(ErrClosed)
	}
	for _, r := range e.recvs {
		r.complete(ErrClosed)
	}
	for _, sg := range slices.Clone(e.stageQ) { // gone takes sg out of the queue
		sg.gone(ErrClosed)
	}
	clear(e.mq)
	e.lastQ = nil
	e.sends, e.recvs, e.stageQ, e.stageSends = nil, nil, nil, nil
	return first
}

// PeerFailed is how the failure detector reports a dead peer: every
// operation that needs it fails with ErrProcFailed.
func (e *Engine) PeerFailed(peer int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		(*handler)(e).PeerFailed(peer, err)
	}
}
