package btltest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
)

// caseTimeout bounds every case; the slowest (64 MiB both ways, 20000
// frames) take well under a second here.
const caseTimeout = 30 * time.Second

// sizes are the payload lengths that sit on the transport's edges.
func sizes(c btl.Caps) []int {
	s := []int{0, 1, c.EagerLimit - 1, c.EagerLimit, c.EagerLimit + 1}
	if c.MaxFrag > 0 && c.MaxFrag < maxFrame {
		s = append(s, c.MaxFrag-1, c.MaxFrag, c.MaxFrag+1, 2*c.MaxFrag+1)
	}
	s = append(s, maxFrame)
	s = slices.DeleteFunc(s, func(n int) bool { return n < 0 || n > maxFrame })
	slices.Sort(s)
	return slices.Compact(s)
}

// complete reports whether nd has sent all of want frames to dst with
// success and received as many from src.
func complete(nd *node, dst, src, sent, recvd int) (bool, error) {
	if len(nd.snt.fails) > 0 {
		return false, fmt.Errorf("rank %d: a frame failed: %v", nd.rank, nd.snt.fails[0])
	}
	if err := nd.rec.failed[src]; err != nil {
		return false, fmt.Errorf("rank %d: PeerFailed(%d): %v", nd.rank, src, err)
	}
	return nd.snt.next[dst] == sent && nd.outstanding() == 0 && nd.rec.got[src] == recvd, nil
}

// testSizes sends every edge size both ways, first one frame at a time
// (each Send finds an empty queue), then all at once.
func testSizes(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	sz := sizes(nodes[0].mod.Caps())
	t.Logf("sizes %v", sz)
	n := len(sz)
	drive(t, caseTimeout, nodes, func(nd *node) (bool, error) {
		peer := peerOfNode(nodes, nd)
		i := nd.snt.next[peer]
		switch {
		case i < n && nd.outstanding() == 0:
			if err := nd.send(peer, sz[i]); err != nil {
				return false, err
			}
		case i >= n && i < 2*n:
			for ; i < 2*n; i++ {
				if err := nd.send(peer, sz[i-n]); err != nil {
					return false, err
				}
			}
		}
		return complete(nd, peer, peer, 2*n, 2*n)
	})
}

// testOrdering sends thousands of frames of mixed sizes both ways, a
// window of them in flight, and checks they arrive in order.
func testOrdering(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	c := nodes[0].mod.Caps()
	big := 256 << 10
	if c.MaxFrag > 0 && c.MaxFrag < big/3 {
		big = 3*c.MaxFrag + 17
	}
	const total = 3000
	plan := make([][]int, len(nodes))
	for i := range plan {
		rng := rand.New(rand.NewPCG(uint64(i), 42))
		for range total {
			var n int
			switch r := rng.IntN(10); {
			case r < 7:
				n = rng.IntN(256)
			case r < 9:
				n = rng.IntN(c.EagerLimit + 64)
			default:
				n = c.EagerLimit + rng.IntN(big)
			}
			plan[i] = append(plan[i], n)
		}
	}
	drive(t, caseTimeout, nodes, func(nd *node) (bool, error) {
		peer := peerOfNode(nodes, nd)
		for k := 0; k < 32 && nd.snt.next[peer] < total && nd.outstanding() < 256; k++ {
			if err := nd.send(peer, plan[nd.rank][nd.snt.next[peer]]); err != nil {
				return false, err
			}
		}
		return complete(nd, peer, peer, total, total)
	})
}

// testOutstanding hands 20000 frames to Send before polling at all.
func testOutstanding(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	const total = 20000
	drive(t, caseTimeout, nodes, func(nd *node) (bool, error) {
		peer := peerOfNode(nodes, nd)
		for i := nd.snt.next[peer]; i < total; i++ {
			if err := nd.send(peer, i%67); err != nil {
				return false, err
			}
		}
		return complete(nd, peer, peer, total, total)
	})
}

// testBackPressure: rank 0 sends 48 MiB to rank 1, which does not poll
// until rank 0 has polled 200 times with frames still queued. Then all of
// it must arrive.
func testBackPressure(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	const frames, size = 48, 1 << 20
	a, b := nodes[0], nodes[1]
	b.mu.Lock() // rank 1 stays away until released
	held := true
	defer func() {
		if held {
			b.mu.Unlock()
		}
	}()
	polls, queued := 0, -1
	drive(t, caseTimeout, []*node{a}, func(nd *node) (bool, error) {
		for nd.snt.next[1] < frames {
			if err := nd.send(1, size); err != nil {
				return false, err
			}
		}
		polls++
		if len(nd.snt.fails) > 0 {
			return false, fmt.Errorf("rank 0: a frame failed: %v", nd.snt.fails[0])
		}
		if nd.outstanding() == 0 {
			return false, fmt.Errorf("all %d MiB completed although rank 1 never polled: frames lost or buffered without bound", frames*size>>20)
		}
		queued = nd.outstanding()
		return polls >= 200, nil
	})
	b.mu.Unlock()
	held = false
	t.Logf("%d of %d frames queued in the sender while the receiver slept", queued, frames)
	drive(t, caseTimeout, nodes, func(nd *node) (bool, error) {
		if nd.rank == 0 {
			return complete(nd, 1, 1, frames, 0)
		}
		return complete(nd, 0, 0, 0, frames)
	})
}

// testClose closes a module with frames queued: each completes once, with
// an error unless it was already out; Send then fails; and the peer, in
// the middle of a frame, hears PeerFailed in bounded time.
func testClose(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	a := nodes[0]
	peer := peerOfNode(nodes, a)
	const frames, size = 8, 4 << 20
	if len(nodes) > 1 {
		// Connect first: a transport may connect lazily and finish the
		// connect in Progress (tcp), and a peer hears of a Close only
		// on a connection that exists. One small frame goes through.
		drive(t, caseTimeout, nodes, func(nd *node) (bool, error) {
			if nd.rank == 1 {
				return complete(nd, 0, 0, 0, 1)
			}
			if nd.snt.next[1] == 0 {
				if err := nd.send(1, 8); err != nil {
					return false, err
				}
			}
			return complete(nd, 1, 1, 1, 0)
		})
	}
	a.mu.Lock()
	done0, ok0 := a.snt.done, a.snt.ok
	for range frames {
		if err := a.send(peer, size); err != nil {
			a.mu.Unlock()
			t.Fatal(err)
		}
	}
	if len(nodes) > 1 {
		// Let some of it out while the receiver does not poll.
		for range 50 {
			a.mod.Progress()
		}
	}
	err := a.mod.Close()
	a.closed = true
	done, ok, outstanding := a.snt.done-done0, a.snt.ok, a.outstanding()
	serr := a.send(peer, 1)
	errs := a.rec.errs
	a.mu.Unlock()
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if outstanding != 0 || done != frames {
		t.Fatalf("after Close: %d of %d frames completed, %d outstanding", done, frames, outstanding)
	}
	if ok-ok0 == frames {
		t.Fatalf("all %d frames (%d MiB) completed without error although the receiver never polled", frames, frames*size>>20)
	}
	if serr == nil {
		t.Error("Send after Close succeeded")
	}
	for _, e := range errs {
		t.Error(e)
	}
	if len(nodes) == 1 {
		return
	}
	b := nodes[1]
	start := time.Now()
	drive(t, caseTimeout, []*node{b}, func(nd *node) (bool, error) {
		if nd.rec.got[0] > ok {
			return false, fmt.Errorf("rank 1 received %d frames, rank 0 completed only %d", nd.rec.got[0], ok)
		}
		_, failed := nd.rec.failed[0]
		return failed, nil
	})
	t.Logf("rank 1 got %d frames, then PeerFailed after %v: %v", b.rec.got[0], time.Since(start).Round(time.Millisecond), b.rec.failed[0])
}

// testWait: a Waiter's Wait returns, and the frame sent while rank 1
// waits arrives.
func testWait(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	a, b := nodes[0], nodes[1]
	w, ok := b.mod.(btl.Waiter)
	if !ok {
		t.Skip("not a btl.Waiter")
	}
	// Warm up: connections, registrations.
	drive(t, caseTimeout, nodes, func(nd *node) (bool, error) {
		if nd.rank == 0 {
			if nd.snt.next[1] == 0 {
				if err := nd.send(1, 8); err != nil {
					return false, err
				}
			}
			return complete(nd, 1, 1, 1, 0)
		}
		return complete(nd, 0, 0, 0, 1)
	})
	b.mu.Lock()
	b.mod.Progress()
	t0 := time.Now()
	w.Wait(time.Millisecond) // nothing to wait for: returns
	idle := time.Since(t0)
	b.mu.Unlock()

	got := make(chan time.Duration, 1)
	go func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		t0 := time.Now()
		for b.rec.got[0] < 2 && time.Since(t0) < caseTimeout {
			w.Wait(5 * time.Second)
			b.mod.Progress()
		}
		got <- time.Since(t0)
	}()
	time.Sleep(20 * time.Millisecond)
	drive(t, caseTimeout, []*node{a}, func(nd *node) (bool, error) {
		if nd.snt.next[1] == 1 {
			if err := nd.send(1, 100); err != nil {
				return false, err
			}
		}
		return complete(nd, 1, 1, 2, 0)
	})
	d := <-got
	if b.rec.got[0] < 2 {
		t.Fatalf("frame sent during Wait not received after %v", d)
	}
	t.Logf("Wait(1ms) idle took %v; the frame sent 20ms into Wait(5s) ended the wait after %v", idle.Round(time.Microsecond), d.Round(time.Microsecond))
}
