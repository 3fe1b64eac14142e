package p2p

import (
	"sync/atomic"
	"time"

	"github.com/gorun/gorun/internal/relstore"
)

// engineLock is the engine's lock: a mutex like sync.Mutex whose Unlock
// is a release store (relstore) where sync.Mutex's is a locked
// read-modify-write (XADD, to learn whether a waiter sleeps). Every
// call of the message rate's path takes the lock once on each side; its
// two locked instructions were ~31% of the software's time a message on
// the 2-core VM (AMD EPYC; BenchmarkWindowSM, perf): this one keeps the
// acquiring CAS only, and there BenchmarkWindowSM went from 73-75 to
// 64-67 ns a message and osu_mbw_mr's 8-byte rate up ~15%; on the lent
// Intel host both moved within their spreads (docs/measurements.md,
// twenty-ninth session). Contended by 2, 4 and 8 goroutines at once (a
// THREAD_MULTIPLE program's) a lock took 1.45x, 1.2x and 0.86x
// sync.Mutex's time on the VM (bench/results/enginelock-2026-11-29.txt).
//
// The price is the wake-up: Unlock reads whether anyone sleeps with a
// plain load, which the CPU may perform before its release store is
// visible (store-load order needs a full fence, which is what it saves),
// so a goroutine that registers as a sleeper in that instant and then
// finds the lock still held misses the wake-up. Sleepers therefore never
// sleep longer than lockNap before they look again: a missed wake-up
// costs at most that, and happens only when a lock changes hands within
// a few instructions of a sleeper's arrival (on amd64: on arm64 the
// release store is an STLR that the next load-acquire cannot pass, and
// under the race detector both are sync/atomic's).
//
// Fairness, as sync.Mutex's starvation mode: a goroutine polling in a
// loop (a wait: lock, progress, unlock, lock again) retakes the lock
// before a woken sleeper's thread gets to it, so a sleeper that has
// waited more than lockStarve asks for the lock to be handed over
// (starving), and the next Unlock hands it over held (lockHanded) with a
// wake-up: only a starving sleeper takes a handed lock, any other
// goroutine waits, the one that handed it over too (on one P it would
// otherwise ask again and take it back before the starving one ran: a
// wait that sleeps under the lock kept a rank's other goroutines out for
// good that way). Without it a failure verdict (PeerFailed, from the
// membership's goroutine) could wait as long as a rank's wait polls.
//
// The zero value is an unlocked lock that wakes its sleepers by their
// timeout only; newEngineLock's wakes them at once.
type engineLock struct {
	v        uint64 // lockFree, lockHeld or lockHanded; first: 64-bit aligned
	sleepers atomic.Int32
	starving atomic.Int32 // sleepers that waited past lockStarve
	wake     chan struct{}
}

const (
	lockFree   = 0
	lockHeld   = 1
	lockHanded = 2 // held, for a starving sleeper to take (Unlock when one starves)

	// lockSpins: looks at the lock before sleeping. Few: a sleeper parks
	// its goroutine, which lets a holder on the same P run, and longer
	// spins (64-400, or with runtime.Gosched) made contended locks slower
	// still on the 2-core VM (up to 2.4x sync.Mutex's time).
	lockSpins = 16
	// lockNap bounds one sleep (a missed wake-up); lockStarve is how long
	// a sleeper lets others retake the lock before it asks for a handover.
	lockNap    = time.Millisecond
	lockStarve = time.Millisecond
)

func newEngineLock() engineLock { return engineLock{wake: make(chan struct{}, 1)} }

// Lock takes the lock, waiting as long as it is held.
func (l *engineLock) Lock() {
	if atomic.CompareAndSwapUint64(&l.v, lockFree, lockHeld) {
		return
	}
	l.lockSlow()
}

// TryLock takes the lock if it is free and reports whether it did.
func (l *engineLock) TryLock() bool {
	return atomic.CompareAndSwapUint64(&l.v, lockFree, lockHeld)
}

func (l *engineLock) lockSlow() {
	for range lockSpins {
		if atomic.LoadUint64(&l.v) == lockFree && atomic.CompareAndSwapUint64(&l.v, lockFree, lockHeld) {
			return
		}
	}
	l.sleepers.Add(1)
	defer l.sleepers.Add(-1)
	start := time.Now()
	starving := false
	t := time.NewTimer(lockNap)
	defer t.Stop()
	for {
		// A handed lock is for a starving sleeper: not for one that came
		// later, such as the goroutine that handed it over and, on one P,
		// asks for it again before the starving one has run.
		if atomic.CompareAndSwapUint64(&l.v, lockFree, lockHeld) ||
			starving && atomic.CompareAndSwapUint64(&l.v, lockHanded, lockHeld) {
			if starving {
				l.starving.Add(-1)
			}
			return
		}
		if !starving && time.Since(start) > lockStarve {
			starving = true
			l.starving.Add(1)
		}
		select {
		case <-l.wake:
			if !starving && atomic.LoadUint64(&l.v) == lockHanded {
				// The wake-up was for the starving sleeper: pass it on,
				// and sleep out this nap rather than take it back.
				l.signal()
				<-t.C
			}
		case <-t.C:
		}
		t.Reset(lockNap) // no stale tick after Reset (Go 1.23 timers)
	}
}

// Unlock releases the lock; it is a run-time error if the lock is not
// held, as for sync.Mutex.
func (l *engineLock) Unlock() {
	if atomic.LoadUint64(&l.v) != lockHeld || l.starving.Load() != 0 {
		l.unlockSlow()
		return
	}
	relstore.Store64(&l.v, lockFree)
	if l.sleepers.Load() != 0 {
		l.signal()
	}
}

// unlockSlow is Unlock of a lock not held (a panic) or with a starving
// sleeper, which is handed the lock.
func (l *engineLock) unlockSlow() {
	if atomic.LoadUint64(&l.v) != lockHeld {
		panic("p2p: Unlock of an engine lock that is not held")
	}
	atomic.StoreUint64(&l.v, lockHanded)
	l.signal()
}

// signal wakes one sleeper, if none has a wake-up pending already.
func (l *engineLock) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}
