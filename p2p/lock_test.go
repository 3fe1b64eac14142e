package p2p

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEngineLockExclusion: goroutines on several threads take the lock,
// some holding it long enough for the others to sleep (lockSlow's
// sleeping path), and never find another inside; every increment of a
// counter that only the lock guards is there at the end. The zero value
// (wake-ups by timeout only) is run too.
func TestEngineLockExclusion(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	fresh := newEngineLock()
	for _, c := range []struct {
		name string
		l    *engineLock
	}{{"new", &fresh}, {"zero", &engineLock{}}} {
		t.Run(c.name, func(t *testing.T) {
			l := c.l
			const workers, rounds = 8, 5000
			var inside atomic.Int32
			var bad atomic.Int32
			count := 0
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range rounds {
						l.Lock()
						if inside.Add(1) != 1 {
							bad.Add(1)
						}
						count++
						if i%500 == w {
							time.Sleep(200 * time.Microsecond) // the others go to sleep
						}
						inside.Add(-1)
						l.Unlock()
					}
				}()
			}
			wg.Wait()
			if n := bad.Load(); n != 0 {
				t.Errorf("%d times a goroutine found another inside the lock", n)
			}
			if count != workers*rounds {
				t.Errorf("count %d, want %d: increments lost", count, workers*rounds)
			}
			if !l.TryLock() {
				t.Fatal("the lock is held after every goroutine unlocked it")
			}
			if l.TryLock() {
				t.Error("TryLock took a held lock")
			}
			l.Unlock()
			if l.sleepers.Load() != 0 || l.starving.Load() != 0 {
				t.Errorf("%d sleepers, %d starving left", l.sleepers.Load(), l.starving.Load())
			}
		})
	}
}

// TestEngineLockBesidePolls: a goroutine that takes and releases the
// lock in a tight loop, as a wait's polls do, does not keep another out:
// the other's Locks all return. A liveness check of the whole (wake-ups,
// naps, handover), not of one mechanism: each alone gets the other in
// (with neither wake-ups nor handover it fails).
func TestEngineLockBesidePolls(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	l := newEngineLock()
	var stop atomic.Bool
	polls := 0
	looped := make(chan struct{})
	go func() {
		defer close(looped)
		for !stop.Load() {
			l.Lock()
			for range 5000 { // a poll's work under the lock (~10 µs),
				polls = polls*31 + 7 // the lock free for a moment only
			}
			l.Unlock()
		}
	}()
	const takes = 50
	got := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		for range takes {
			l.Lock()
			l.Unlock()
			time.Sleep(100 * time.Microsecond)
		}
		got <- time.Since(start)
	}()
	select {
	case d := <-got:
		t.Logf("%d Locks beside a polling loop in %v", takes, d)
	case <-time.After(20 * time.Second):
		t.Fatalf("Lock beside a goroutine polling under the lock: not all %d took it in 20 s (starving %d, sleepers %d)", takes, l.starving.Load(), l.sleepers.Load())
	}
	stop.Store(true)
	<-looped
}

// TestEngineLockHandover: a goroutine asleep in Lock for longer than
// lockStarve is handed the lock by the next Unlock: the unlocking
// goroutine cannot take it straight back, neither by TryLock nor by
// Lock (which returns only after the sleeper has had the lock). The
// unlocking goroutine may take a handed lock only once it starves too (a
// machine too busy to run the sleeper for lockStarve): such a round is
// tried again, up to three.
func TestEngineLockHandover(t *testing.T) {
	for round := 1; ; round++ {
		err := handover(t)
		if err == nil {
			return
		}
		if round == 3 {
			t.Fatalf("round %d: %v", round, err)
		}
		t.Logf("round %d: %v; again", round, err)
	}
}

// handover is one round of TestEngineLockHandover: a fatal failure, or
// an error where the unlocking goroutine's Lock returned first.
func handover(t *testing.T) error {
	l := newEngineLock()
	l.Lock()
	took := make(chan struct{})
	go func() {
		l.Lock()
		close(took)
		l.Unlock()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for l.starving.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiting goroutine never asked for the lock (sleepers %d)", l.sleepers.Load())
		}
		time.Sleep(lockStarve / 4)
	}
	l.Unlock()
	if l.TryLock() {
		t.Fatal("the unlocking goroutine took the lock back from a starving sleeper (TryLock)")
	}
	l.Lock() // returns once the sleeper has had the lock and let it go
	var err error
	select {
	case <-took:
	default:
		err = fmt.Errorf("the unlocking goroutine's Lock took the lock handed to a starving sleeper")
	}
	l.Unlock()
	select {
	case <-took:
	case <-time.After(20 * time.Second):
		t.Fatal("the starving sleeper never got the lock in 20 s")
	}
	if l.starving.Load() != 0 || l.sleepers.Load() != 0 {
		t.Errorf("after the handover: starving %d, sleepers %d, want 0, 0", l.starving.Load(), l.sleepers.Load())
	}
	return err
}

// TestEngineLockUnlockUnheld: unlocking a lock nobody holds is a
// programming error and panics, as sync.Mutex's does.
func TestEngineLockUnlockUnheld(t *testing.T) {
	l := newEngineLock()
	defer func() {
		if recover() == nil {
			t.Error("Unlock of a free lock did not panic")
		}
	}()
	l.Unlock()
}

// TestEngineLockHandoverRelock: the holder sleeps under the lock and
// takes it again right after each Unlock, as a wait in its sleeping
// phase does, on one P: the starving sleeper must still get the lock
// (handed over, the holder may not take a handed lock back by waiting
// for it itself). Where it could, a wait under the lock kept the other
// goroutines of a rank out for good (TestCtxConcurrent hung).
func TestEngineLockHandoverRelock(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l := newEngineLock()
	var stop atomic.Bool
	holding := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Lock()
		close(holding)
		for !stop.Load() {
			time.Sleep(2 * lockStarve) // a wait's sleep under the lock
			l.Unlock()
			l.Lock()
		}
		l.Unlock()
	}()
	<-holding
	got := make(chan struct{})
	go func() {
		l.Lock()
		l.Unlock()
		close(got)
	}()
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Errorf("a goroutine waiting beside one that sleeps under the lock and retakes it did not get it in 20 s (starving %d, sleepers %d)", l.starving.Load(), l.sleepers.Load())
	}
	stop.Store(true)
	<-done
}
