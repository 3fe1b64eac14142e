package relstore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestMessagePassing: a writer fills a record and then sets its flag with
// Store64; a reader that sees the flag (atomic load) must see the whole
// record, every round, from another goroutine (another thread).
func TestMessagePassing(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two goroutines running at once (GOMAXPROCS >= 2)")
	}
	const rounds = 100000
	var data [8]uint64
	var flag uint64
	var ack atomic.Uint64
	deadline := time.Now().Add(30 * time.Second)
	// until spins until cond holds, yielding now and then (a busy
	// machine: let the other side run); false past the deadline.
	until := func(cond func() bool) bool {
		for k := 0; !cond(); k++ {
			if k&1023 == 1023 {
				if time.Now().After(deadline) {
					return false
				}
				runtime.Gosched()
			}
		}
		return true
	}
	done := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= rounds; i++ {
			if !until(func() bool { return atomic.LoadUint64(&flag) == i }) {
				done <- fmt.Errorf("round %d: the flag never came (it reads %d)", i, atomic.LoadUint64(&flag))
				return
			}
			for k, v := range data {
				if v != i*uint64(k+1) {
					done <- fmt.Errorf("round %d: word %d is %d after the flag", i, k, v)
					return
				}
			}
			ack.Store(i)
		}
		done <- nil
	}()
	for i := uint64(1); i <= rounds; i++ {
		for k := range data {
			data[k] = i * uint64(k+1)
		}
		Store64(&flag, i)
		if !until(func() bool { return ack.Load() == i }) {
			break // the reader reports why
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
