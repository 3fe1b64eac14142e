package relstore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestMessagePassing: a writer fills a record and then sets its flag with
// Store32; a reader that sees the flag (atomic load) must see the whole
// record, every round, from another goroutine (another thread).
func TestMessagePassing(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two goroutines running at once (GOMAXPROCS >= 2)")
	}
	const rounds = 100000
	var data [8]uint64
	var flag uint32
	var ack atomic.Uint32
	done := make(chan error, 1)
	go func() {
		for i := uint32(1); i <= rounds; i++ {
			for k := 0; atomic.LoadUint32(&flag) != i; k++ {
				if k&1023 == 1023 {
					runtime.Gosched() // a busy machine: let the writer run
				}
			}
			for k, v := range data {
				if v != uint64(i)*uint64(k+1) {
					done <- fmt.Errorf("round %d: word %d is %d after the flag", i, k, v)
					return
				}
			}
			ack.Store(i)
		}
		done <- nil
	}()
	for i := uint32(1); i <= rounds; i++ {
		for k := range data {
			data[k] = uint64(i) * uint64(k+1)
		}
		Store32(&flag, i)
		for k := 0; ack.Load() != i; k++ {
			if k&1023 == 1023 {
				runtime.Gosched()
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
