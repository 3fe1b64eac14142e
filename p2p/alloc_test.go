package p2p

import (
	"testing"
)

// TestWindowAllocs: the nonblocking path allocates nothing in steady
// state: a window of 64 Irecvs and 64 Isends, waited for and released,
// over btl/self and btl/sm (both engines driven from this goroutine, so
// that the count is this window's alone), eager sizes only. Requests come
// from the engine's free list, the matching queues and the ring's queue
// reuse their arrays, and an unexpected message (the sends of sm run ahead
// of nothing here: the receives are posted first) is not in the window.
func TestWindowAllocs(t *testing.T) {
	for _, s := range []setup{{name: "self", btl: "self", bare: true}, {name: "sm", btl: "sm", bare: true}} {
		t.Run(s.name, func(t *testing.T) {
			w := openWorld(t, s)
			snd, rcv := w.sender(), w.receiver()
			sbuf, rbuf := make([]byte, 64), make([]byte, 64)
			rs := make([]*Request, 2*rateWindow)
			var failed error
			one := func() {
				n := len(rs) / 2
				for k := range n {
					r, err := rcv.Irecv(1, w.src(), 100, rbuf)
					if err != nil {
						failed = err
						return
					}
					rs[k] = r
				}
				for k := range n {
					r, err := snd.Isend(1, w.dst(), 100, sbuf, false)
					if err != nil {
						failed = err
						return
					}
					rs[n+k] = r
				}
				for !allDone(rs) {
					snd.Progress()
					rcv.Progress()
				}
				for k, r := range rs {
					if _, err := r.Result(); err != nil {
						failed = err
					}
					r.e.Release(r)
					rs[k] = nil
				}
			}
			for range 4 { // warm up: free list, queues, routes
				one()
			}
			allocs := testing.AllocsPerRun(20, one)
			if failed != nil {
				t.Fatal(failed)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per window of %d messages, want 0", allocs, rateWindow)
			}
		})
	}
}

func allDone(rs []*Request) bool {
	for _, r := range rs {
		if !r.Done() {
			return false
		}
	}
	return true
}
