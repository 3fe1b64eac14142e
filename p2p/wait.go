package p2p

import (
	"os"
	"runtime"
	"time"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/nap"
	"github.com/gorun/gorun/internal/params"
)

var (
	pSpin = params.Duration("GORUN_WAIT_SPIN", 50*time.Microsecond,
		"how long a blocked call polls the transports flat out before yielding the CPU (0 when ranks outnumber cores)")
	pYield = params.Duration(envYield, 100*time.Millisecond,
		"how long a blocked call polls with sched_yield between polls before it sleeps in the transport's wait (ppoll, futex); unset, 2ms where ranks outnumber cores")
	pSleep = params.Duration("GORUN_WAIT_SLEEP", time.Millisecond,
		"longest single sleep of a blocked call in its third phase; a transport wakes it earlier when data arrives")
	pOversub = params.Int("GORUN_OVERSUBSCRIBED", -1,
		"1 when ranks outnumber this host's cores, 0 when not (gorun sets it), -1 to compare the world's size with the CPUs this process may run on")
)

// waitPolicy is the three-phase wait of docs/measurements.md: poll flat out, then poll
// with sched_yield (runtime.Gosched does not give the OS thread away, and
// pure spinning gave millisecond tails when oversubscribed), then sleep in
// the transport's own wait.
type waitPolicy struct {
	spin, yield, sleep time.Duration
}

func defaultWaitPolicy(size int) waitPolicy {
	w := waitPolicy{spin: pSpin(), yield: pYield(), sleep: pSleep()}
	over := pOversub()
	if over == -1 && size > runtime.NumCPU() {
		over = 1
	}
	if over == 1 {
		w.spin = 0
		if os.Getenv(envYield) == "" {
			w.yield = oversubYield
		}
	}
	return w
}

// envYield sets how long a wait polls before it sleeps (pYield). Its
// default, 100 ms, is for ranks that have a core each: a rank whose wait
// slept (a barrier waiting 20-50 ms for a rank that computes longer)
// then ran its next 5-8 ms of calls 2-4x slower at np=16 on the lent
// 16-core host, barriers of 1.7-4.6 us against 0.95-1.1 with waits that
// polled: its idle CPU halts (bare metal: idle states, clock ramps);
// docs/measurements.md, "The first call's set-up". Open MPI and MPICH
// poll for as long as they wait. A wait longer than that sleeps, so that
// a rank blocked for seconds gives its core back.
const envYield = "GORUN_WAIT_YIELD"

// oversubYield is pYield's default where ranks outnumber cores, where a
// rank that polls takes the CPU of one that has work.
const oversubYield = 2 * time.Millisecond

// progress polls every module once; the lock is held.
func (e *Engine) progress() int {
	if e.closed {
		return 0 // the transports are closed: polling one would touch freed state
	}
	n := 0
	for _, m := range e.mods {
		n += m.Progress()
	}
	if len(e.stageQ) > 0 {
		e.kick() // a pinned buffer may have come back on a failure path
	}
	return n
}

// Progress polls the transports once.
func (e *Engine) Progress() {
	e.mu.Lock()
	e.progress()
	e.mu.Unlock()
}

// waiter tracks one blocked call's phase.
type waiter struct {
	e     *Engine
	start time.Time
	iter  int
	phase int // 0 spin, 1 yield, 2 sleep
}

// pass counts a poll that found the awaited condition unmet and passes
// the time of the spinning and yielding phases; it reports whether the
// wait has reached its sleep phase, where the caller sleeps in its own
// way. The clock is read once every 64 polls while spinning (reading it on
// every poll cost 12% of a small-message ping-pong in a profile) and every
// 16 while yielding.
func (w *waiter) pass() bool {
	w.iter++
	p := &w.e.wait
	switch w.phase {
	case 0:
		if p.spin > 0 && w.iter&63 != 0 {
			return false
		}
		if w.start.IsZero() {
			w.start = time.Now()
			if p.spin > 0 {
				return false
			}
		}
		if time.Since(w.start) < p.spin {
			return false
		}
		w.phase = 1
		fallthrough
	case 1:
		nap.Pass(w.iter)
		if w.iter&15 != 0 || time.Since(w.start) < p.spin+p.yield {
			return false
		}
		w.phase = 2
	}
	return true
}

// idle is called after a poll that found the awaited condition unmet; it
// decides how to pass the time until the next poll: pass's phases, then
// sleeps in the transport, which wakes it when data arrives.
func (w *waiter) idle() {
	w.e.giveWay()
	if w.phase > 0 || w.iter&15 == 15 {
		w.e.runIdle()
	}
	if !w.pass() {
		return
	}
	w.e.mu.Lock()
	if w.e.busy() {
		// Work is pending that only polling completes (GPU copies).
		w.e.mu.Unlock()
		nap.Yield()
		return
	}
	if w.e.waiter != nil && !w.e.closed {
		w.e.waiter.Wait(w.e.wait.sleep)
		w.e.mu.Unlock()
		return
	}
	w.e.mu.Unlock()
	nap.Sleep(50 * time.Microsecond)
}

// until polls until cond (evaluated under the lock) holds.
func (e *Engine) until(cond func() bool) {
	w := waiter{e: e}
	for {
		e.mu.Lock()
		e.progress()
		ok := cond()
		e.mu.Unlock()
		if ok {
			return
		}
		w.idle()
	}
}

// Wait blocks until r completes and returns its outcome.
func (r *Request) Wait() (Status, error) {
	if r.done.Load() {
		return r.st, r.err
	}
	e := r.e
	w := waiter{e: e}
	for {
		e.mu.Lock()
		e.progress()
		e.mu.Unlock()
		if r.done.Load() {
			return r.st, r.err
		}
		w.idle()
	}
}

// WaitRelease is Wait followed by the engine's Release of r, with r
// released under the lock of the poll that found it complete instead of
// under a lock of its own: a blocking call's request (package mpi's Send
// that did not complete within the call, Ssend, Sendrecv) costs one lock
// pair less (Release was 4% of a rank's samples in an 8-byte ping-pong
// on the 2-core VM; a blocking Recv goes through RecvMem).
func (r *Request) WaitRelease() (Status, error) {
	r.e.mu.Lock()
	return r.waitRelease(nil)
}

// WaitReleaseAt is WaitRelease for a request that its owner keeps at *at
// (package mpi's Request): *at is set to nil under the lock that gives r
// back, so that CancelRecvAt, which reads *at under the lock from another
// goroutine, never finds r once r may be another operation's.
func (r *Request) WaitReleaseAt(at **Request) (Status, error) {
	r.e.mu.Lock()
	return r.waitRelease(at)
}

// waitRelease is WaitRelease (WaitReleaseAt when at is not nil) with the
// lock held; it returns with the lock released.
func (r *Request) waitRelease(at **Request) (Status, error) {
	e := r.e
	w := waiter{e: e}
	for {
		if !r.done.Load() {
			e.progress()
		}
		if r.done.Load() {
			st, err := r.st, r.err
			if at != nil {
				*at = nil
			}
			r.release()
			e.mu.Unlock()
			return st, err
		}
		e.mu.Unlock()
		w.idle()
		e.mu.Lock()
	}
}

// RecvMem is IrecvMem followed by WaitRelease, with the first poll under
// the lock that posts the receive: a blocking receive takes the engine
// lock once fewer again.
func (e *Engine) RecvMem(ctx uint32, src, tag int, m btl.Mem) (Status, error) {
	e.mu.Lock()
	r := e.newRequest()
	r.mem = m
	if err := e.irecv(r, ctx, src, tag); err != nil {
		r.reset()
		e.mu.Unlock()
		return Status{}, err
	}
	return r.waitRelease(nil)
}

// Test polls once and reports whether r has completed.
func (r *Request) Test() (bool, Status, error) {
	if !r.done.Load() {
		r.e.Progress()
		if !r.done.Load() {
			r.e.giveWay()
			return false, Status{}, nil
		}
	}
	return true, r.st, r.err
}

// WaitFor blocks until cond holds. cond is evaluated after every poll of
// the transports with the engine lock held: it may look at requests
// (Done) but must call no method of the engine. It lets a caller wait for
// requests it keeps in its own structures without building a slice of
// them (package mpi's Waitall).
func (e *Engine) WaitFor(cond func() bool) { e.until(cond) }

// WaitAll blocks until every request has completed. Nil requests are
// ignored.
func (e *Engine) WaitAll(rs []*Request) {
	i := 0
	e.until(func() bool {
		for ; i < len(rs); i++ {
			if rs[i] != nil && !rs[i].done.Load() {
				return false
			}
		}
		return true
	})
}

// WaitAny blocks until one of the non-nil requests has completed and
// returns its index, or -1 if all are nil.
func (e *Engine) WaitAny(rs []*Request) int {
	idx := -1
	any := false
	for _, r := range rs {
		any = any || r != nil
	}
	if !any {
		return -1
	}
	e.until(func() bool {
		for i, r := range rs {
			if r != nil && r.done.Load() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// Probe blocks until a message matching (ctx, src, tag) has arrived and
// returns its status without receiving it.
func (e *Engine) Probe(ctx uint32, src, tag int) (Status, error) {
	w := waiter{e: e}
	for {
		ok, st, err := e.Iprobe(ctx, src, tag)
		if ok || err != nil {
			return st, err
		}
		w.idle()
	}
}

// Idler passes the time of a blocked call that waits for something the
// engine cannot see, such as a flag another process sets in shared memory
// (coll's shared-memory collectives): the same three phases as a blocked
// Wait (flat out, sched_yield, sleep), except that the third sleeps at
// most IdleSleep, since no transport wakes it; every call of Idle from the
// second phase on, and every 64th before, also polls the transports and
// runs the OnIdle hooks, so that point-to-point traffic, notices and
// window requests keep moving meanwhile.
type Idler struct {
	w waiter
}

// IdleSleep is the longest sleep of an Idler.
const IdleSleep = 20 * time.Microsecond

// Idler returns an Idler for one wait.
func (e *Engine) Idler() Idler { return Idler{w: waiter{e: e}} }

// Idle is called after each check that found the condition unmet. Its
// sleeps are short naps, never the transport's wait: what an Idler waits
// for (shared-memory flags) wakes no transport (through the transport's
// wait of up to GORUN_WAIT_SLEEP, a barrier at np=32 with waits forced
// into the sleep phase took 1.04 ms a call, against 0.10 ms with naps).
func (i *Idler) Idle() {
	w := &i.w
	w.e.giveWay()
	if w.phase == 0 && w.iter&63 != 63 {
		w.pass()
		return
	}
	w.e.runIdle()
	w.e.Progress()
	if w.pass() {
		nap.Sleep(IdleSleep)
	}
}

// Spins reports whether the wait polls flat out before it yields (not
// when ranks outnumber cores: GORUN_WAIT_SPIN is 0 there).
func (i *Idler) Spins() bool { return i.w.e.wait.spin > 0 }

// Sleeping reports whether Idle now sleeps: a wait that checks something
// every so many Idles should check it on every Idle then (1024 sleeps are
// most of a second).
func (i *Idler) Sleeping() bool { return i.w.phase >= 2 }

// Failed reports why peer can no longer be reached (its failure as the
// failure detector or a transport reported it), or nil.
func (e *Engine) Failed(peer int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if peer < 0 || peer >= len(e.failed) {
		return nil
	}
	return e.failed[peer]
}

// Check is Failed, after asking the transports what they can tell of
// peer with nothing in flight to it (btl.Checker: its process exited, it
// closed its transport), which fails it as a transport's report does
// (ErrProcFailed). coll's shared-memory waits call it: they otherwise
// waited for ever for a rank that will never come (one that finalized
// after a mismatched collective).
func (e *Engine) Check(peer int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if peer < 0 || peer >= len(e.failed) {
		return nil
	}
	if err := e.failed[peer]; err != nil || e.closed {
		return err
	}
	for _, m := range e.mods {
		if c, ok := m.(btl.Checker); ok && e.failed[peer] == nil {
			c.CheckPeer(e.peers[peer])
		}
	}
	return e.failed[peer]
}

// idleHook is one function registered by OnIdle.
type idleHook struct{ f func() }

// OnIdle registers f to be called by blocked calls of this engine while
// they wait (Wait, WaitFor, Probe and the Idlers of coll's shared-memory
// collectives): on every 16th poll while they spin, on every poll after,
// without the engine's lock. It is how a process that sits in a blocking
// call serves what others expect of it without waiting for a goroutine
// of its own to wake up (one-sided windows: their requests, served in
// microseconds where the window's poller sleeps up to a millisecond). f
// must be quick when there is nothing to do, must not block for long, and
// may be called from several goroutines at once. The returned function
// removes it.
func (e *Engine) OnIdle(f func()) (remove func()) {
	h := &idleHook{f: f}
	e.mu.Lock()
	defer e.mu.Unlock()
	var hooks []*idleHook
	if p := e.idleHooks.Load(); p != nil {
		hooks = append(hooks, *p...)
	}
	hooks = append(hooks, h)
	e.idleHooks.Store(&hooks)
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		var keep []*idleHook
		if p := e.idleHooks.Load(); p != nil {
			for _, x := range *p {
				if x != h {
					keep = append(keep, x)
				}
			}
		}
		e.idleHooks.Store(&keep)
	}
}

// runIdle calls the OnIdle hooks, if any; the lock is not held.
func (e *Engine) runIdle() {
	if p := e.idleHooks.Load(); p != nil {
		for _, h := range *p {
			h.f()
		}
	}
}

// giveWay lets the helpers run (Helping): one started by this goroutine
// waits in its processor's run queue until this goroutine gives way (the
// runtime's other threads leave such a goroutine to the processor's owner
// for a while: on ranks bound to one CPU each, an Ibarrier and its Wait
// took 100-150 µs against the blocking Barrier's 0.15 on the 2-core VM).
//
// With one helper running and a goroutine asleep for its call (Parked),
// the helper is the one waiting here, and nobody needs the way: a pass
// through the scheduler on every poll, reading the clock, was most of
// what a nonblocking call cost beyond its algorithm.
//
// It first begins the calls deferred (Defer): every wait of the process,
// and every test, is where they begin.
func (e *Engine) giveWay() {
	if e.deferred.Load() != 0 {
		e.starter()
	}
	if h := e.helpers.Load(); h > 1 || h == 1 && e.parked.Load() == 0 {
		runtime.Gosched()
	}
}

// GiveWay is what a wait does between its polls for the process's other
// work (giveWay), for the calls that poll without a wait: Iprobe,
// Testall and the like, which a program may call in a loop.
func (e *Engine) GiveWay() { e.giveWay() }

// SetStarter sets the function that begins the calls deferred (Defer);
// the process sets it once, before deferring any.
func (e *Engine) SetStarter(f func()) { e.starter = f }

// Defer counts n calls (n < 0: uncounts them) whose work the process has
// deferred until its next wait or test, where the starter begins them
// (SetStarter); a call that its own Wait runs itself is uncounted there.
func (e *Engine) Defer(n int32) { e.deferred.Add(n) }

// Pending reports whether calls of the process are deferred (Defer) or
// handed to helpers (Helping): only then may a wait find a call of its
// own that nobody has begun.
func (e *Engine) Pending() bool { return e.deferred.Load() != 0 || e.helpers.Load() != 0 }

// Parked counts a goroutine that sleeps until a helper's call ends (a
// Wait on a nonblocking collective), from now until Woke: a pair of
// calls, as Helping and Helped are.
func (e *Engine) Parked() { e.parked.Add(1) }

// Woke ends what Parked began.
func (e *Engine) Woke() { e.parked.Add(-1) }

// Helping counts a goroutine that runs work for this process's calls (a
// nonblocking collective's) from now until Helped: meanwhile every wait
// gives way to other goroutines on each turn (giveWay). A pair of calls,
// not a returned func: that closure escaped into the work's and was an
// allocation a call.
func (e *Engine) Helping() { e.helpers.Add(1) }

// Helped ends what Helping began.
func (e *Engine) Helped() { e.helpers.Add(-1) }
