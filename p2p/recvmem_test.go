package p2p

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
)

// freeDup reports a request that is on e's free list twice.
func freeDup(e *Engine) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[*Request]bool{}
	for _, r := range e.free {
		if seen[r] {
			return fmt.Errorf("request %p twice on the free list", r)
		}
		seen[r] = true
	}
	return nil
}

// TestRecvMem runs blocking receives (RecvMem) and sends (WaitRelease) of
// every protocol, the sender late so that the receiver waits (its idle
// path, entered without the lock), then a RecvMem that a failure verdict
// ends, one from the failed peer (the post's error path) and one that
// Close ends: each returns with the lock free and no request twice on the
// free list.
func TestRecvMem(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		sizes := append([]int{0, 8, 100, w.eager}, w.rendezvous()...)
		bufs := make([][]byte, len(sizes))
		w.within(t, func() {
			for i, n := range sizes {
				time.Sleep(3 * time.Millisecond) // the receiver reaches its idle path
				r, err := w.sender().Isend(1, w.dst(), i, pattern(i, n), i%2 == 1)
				if err != nil {
					t.Errorf("send %d: %v", i, err)
					return
				}
				if _, err := r.WaitRelease(); err != nil {
					t.Errorf("send %d: %v", i, err)
				}
			}
		}, func() {
			for i, n := range sizes {
				bufs[i] = make([]byte, n)
				src := w.src()
				if i%3 == 2 {
					src = AnySource
				}
				st, err := w.receiver().RecvMem(1, src, i, btl.HostMem(bufs[i]))
				checkRecv(t, fmt.Sprint("recv ", i), st, err, bufs[i], w.src(), i, pattern(i, n))
			}
		})
		for _, e := range w.engs {
			if err := freeDup(e); err != nil {
				t.Error(err)
			}
			if !e.mu.TryLock() {
				t.Error("lock held")
			} else {
				e.mu.Unlock()
			}
		}
		if len(w.engs) < 2 {
			return
		}
		// Failure verdict while waiting, and the error path after it.
		e := w.receiver()
		recvEndedBy(t, e, w.src(), 99, "PeerFailed", func() { e.PeerFailed(w.src(), errors.New("gone")) }, ErrProcFailed)
		nfree := len(e.free)
		if _, err := e.RecvMem(1, w.src(), 99, btl.HostMem(nil)); !errors.Is(err, ErrProcFailed) {
			t.Errorf("RecvMem from failed peer: %v", err)
		}
		if !e.mu.TryLock() {
			t.Fatal("lock held after RecvMem's error")
		}
		if len(e.free) != nfree {
			t.Errorf("free list %d -> %d", nfree, len(e.free))
		}
		e.mu.Unlock()
		recvEndedBy(t, e, AnySource, 98, "Close", func() { e.Close() }, ErrClosed)
		if err := freeDup(e); err != nil {
			t.Error(err)
		}
	})
}

// recvEndedBy starts a RecvMem from src with tag on e, lets it reach its
// wait, runs end (named what) and checks that the receive returns want.
func recvEndedBy(t *testing.T, e *Engine, src, tag int, what string, end func(), want error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := e.RecvMem(1, src, tag, btl.HostMem(make([]byte, 8)))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	end()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Errorf("RecvMem after %s: %v, want %v", what, err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("RecvMem hangs after %s", what)
	}
}
