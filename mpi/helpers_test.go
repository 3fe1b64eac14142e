package mpi

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// jobFunc is a func as a helper's job.
type jobFunc func()

func (f jobFunc) work() { f() }

// TestHelperPool: calls in flight at once each get a goroutine; finished
// ones park (up to maxParked) and take the next calls; close lets the
// parked ones exit.
func TestHelperPool(t *testing.T) {
	base := runtime.NumGoroutine()
	var p helperPool
	parked := func() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.parked) }
	until := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: %d parked, %d goroutines (%d before)", what, parked(), runtime.NumGoroutine(), base)
			}
		}
	}
	const n = maxParked + 4
	gate := make(chan struct{})
	var ran sync.WaitGroup
	ran.Add(n)
	for range n {
		// Each blocks until the gate opens: all n must run at once.
		p.run(jobFunc(func() { <-gate; ran.Done() }))
	}
	if got := parked(); got != 0 {
		t.Fatalf("%d helpers parked while every call blocks", got)
	}
	close(gate)
	ran.Wait()
	until("after the calls", func() bool { return parked() == maxParked })
	until("the extra helpers' exit", func() bool { return runtime.NumGoroutine() <= base+maxParked })
	done := make(chan struct{})
	p.run(jobFunc(func() { close(done) }))
	<-done
	until("a call on a parked helper", func() bool { return parked() == maxParked })
	if g := runtime.NumGoroutine(); g > base+maxParked {
		t.Fatalf("a call with helpers parked started a goroutine: %d goroutines, %d before", g, base)
	}
	p.close()
	until("close", func() bool { return runtime.NumGoroutine() <= base })
	done = make(chan struct{})
	p.run(jobFunc(func() { close(done) })) // after close: runs, parks nothing
	<-done
	until("a call after close", func() bool { return parked() == 0 && runtime.NumGoroutine() <= base })
}
