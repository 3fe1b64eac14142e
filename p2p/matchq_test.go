package p2p

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/btl"
)

// TestContexts: two contexts interleaved on one route, with wildcard
// receives posted in each before the messages arrive and messages of each
// left unexpected. Each wildcard matches within its own context only;
// revoking context A fails A's posted receives, drops A's unexpected
// messages and refuses A's rendezvous offer (its sender completes with
// ErrRevoked), and leaves B's posted receive and B's unexpected messages
// untouched: they are then matched in order (source, tag, AnyTag). Once
// freed (Unrevoke) with their queues empty, the contexts' queues are
// dropped.
func TestContexts(t *testing.T) {
	const a, b = 11, 12
	eachWorld(t, func(t *testing.T, w *world) {
		big := w.eager + 1 // rendezvous
		msgs := []msg{
			{ctx: a, tag: 1, data: pattern(0, 10)},  // 0: A's posted AnySource/AnyTag
			{ctx: b, tag: 5, data: pattern(1, 11)},  // 1: B's first posted AnySource/AnyTag
			{ctx: b, tag: 6, data: pattern(2, big)}, // 2: B's posted (src, AnyTag)
			{ctx: b, tag: 7, data: pattern(3, 12)},  // 3: unexpected on B
			{ctx: b, tag: 8, data: pattern(4, big)}, // 4: unexpected RTS on B
			{ctx: b, tag: 7, data: pattern(5, 13)},  // 5: unexpected on B
			{ctx: a, tag: 2, data: pattern(6, 14)},  // 6: unexpected on A: dropped
			{ctx: a, tag: 3, data: pattern(7, big)}, // 7: unexpected RTS on A: refused
		}
		late := msg{ctx: b, tag: 42, data: pattern(8, 15)} // B's posted receive, sent after the revoke
		src, dst := w.src(), w.dst()
		posted, revoked := make(chan struct{}), make(chan struct{})
		revErr := fmt.Errorf("test revoke of context %d: %w", a, ErrRevoked)
		w.within(t, func() {
			e := w.sender()
			<-posted
			rs := make([]*Request, len(msgs)+1)
			for i, m := range msgs {
				r, err := e.Isend(m.ctx, dst, m.tag, m.data, false)
				if err != nil {
					t.Errorf("send %d: %v", i, err)
					return
				}
				rs[i] = r
			}
			waitProgress(e, revoked) // the rendezvous sends need their sender's polls
			r, err := e.Isend(late.ctx, dst, late.tag, late.data, false)
			if err != nil {
				t.Errorf("send after the revoke: %v", err)
				return
			}
			rs[len(msgs)] = r
			e.WaitAll(rs)
			for i, r := range rs {
				_, err := r.Result()
				switch {
				case i == 7 && !errors.Is(err, ErrRevoked):
					t.Errorf("send %d (context A's rendezvous): %v, want ErrRevoked", i, err)
				case i != 7 && err != nil:
					t.Errorf("send %d: %v", i, err)
				}
			}
		}, func() {
			e := w.receiver()
			recv := func(ctx uint32, s, tag int) (*Request, []byte) { return postRecv(t, e, ctx, s, tag, big) }
			check := func(what string, r *Request, buf []byte, m msg) { waitRecv(t, what, r, buf, src, m) }
			rA0, bA0 := recv(a, AnySource, AnyTag)
			rA1, _ := recv(a, src, 99)
			rB0, bB0 := recv(b, AnySource, AnyTag)
			rB1, bB1 := recv(b, src, AnyTag)
			rB2, bB2 := recv(b, AnySource, late.tag)
			close(posted)
			if t.Failed() {
				close(revoked)
				return
			}
			check("A's posted wildcard", rA0, bA0, msgs[0])
			check("B's first posted wildcard", rB0, bB0, msgs[1])
			check("B's posted AnyTag", rB1, bB1, msgs[2])
			// Per source the route is FIFO: once the last message of
			// each context has arrived, all have.
			for _, p := range [][2]int{{a, 3}, {b, 7}} {
				if _, err := e.Probe(uint32(p[0]), src, p[1]); err != nil {
					t.Errorf("probe %v: %v", p, err)
				}
			}
			e.Revoke(a, revErr)
			if !rA1.Done() {
				t.Errorf("A's posted receive is still pending after A's revoke")
			} else if _, err := rA1.Result(); !errors.Is(err, ErrRevoked) {
				t.Errorf("A's posted receive: %v, want ErrRevoked", err)
			}
			if ok, st, err := e.Iprobe(a, AnySource, AnyTag); ok || !errors.Is(err, ErrRevoked) {
				t.Errorf("probe of revoked A: %v %+v %v, want ErrRevoked", ok, st, err)
			}
			if rB2.Done() {
				t.Errorf("B's posted receive completed at A's revoke: %v", rB2.err)
			}
			ok, st, err := e.Iprobe(b, AnySource, AnyTag)
			if want := (Status{Source: src, Tag: 7, Bytes: len(msgs[3].data)}); !ok || err != nil || st != want {
				t.Errorf("probe of B after A's revoke: %v %+v %v, want %+v", ok, st, err, want)
			}
			close(revoked)
			r, buf := recv(b, src, 7)
			check("B's first unexpected tag 7", r, buf, msgs[3])
			r, buf = recv(b, AnySource, 7)
			check("B's second unexpected tag 7 (past the tag 8 RTS)", r, buf, msgs[5])
			r, buf = recv(b, AnySource, AnyTag)
			check("B's unexpected RTS", r, buf, msgs[4])
			check("B's receive posted before A's revoke", rB2, bB2, late)
			if ok, st, _ := e.Iprobe(b, AnySource, AnyTag); ok {
				t.Errorf("B holds a message no one sent: %+v", st)
			}
			e.Unrevoke(a)
			if n := e.Contexts(); n != 1 {
				t.Errorf("%d contexts with queues after A's free, want 1 (B)", n)
			}
			e.Unrevoke(b)
			if n := e.Contexts(); n != 0 {
				t.Errorf("%d contexts with queues after B's free, want 0", n)
			}
		})
	})
}

// TestRevokeRefusalFails: Revoke refuses the unexpected RTSs of its
// context by sending CTSs; over TCP a refusal whose write fails (the
// sender is gone) reports the peer failed inline, from inside Send, and
// PeerFailed drops the peer's half-arrived message from the same queue.
// Revoke must not filter that queue while this happens (it sends the
// refusals after filtering): before, an entry was lost or duplicated, here
// a nil entry was read and the receiver panicked. The sender's engine
// is closed for real (its sockets with it); the half-arrived eager frame
// is the state the TCP module leaves between Begin and End when a frame's
// payload comes in several reads, set here by calling the receiver's
// handler as the module would, since a real split read cannot be timed.
func TestRevokeRefusalFails(t *testing.T) {
	const a, b = 21, 22
	w := openWorld(t, setup{name: "tcp", btl: "tcp"})
	snd, rcv := w.sender(), w.receiver()
	src, dst := w.src(), w.dst()
	const offers = 4
	bigs := make([]*Request, offers)
	for i := range offers {
		r, err := snd.Isend(a, dst, i, pattern(i, w.eager+1), false)
		if err != nil {
			t.Fatal(err)
		}
		bigs[i] = r
	}
	keep, err := snd.Isend(b, dst, 9, pattern(9, 10), false)
	if err != nil {
		t.Fatal(err)
	}
	// A frame from the receiver to the sender opens the receiver's
	// connection, so that its refusals will go by an established socket.
	hello, err := snd.Irecv(b, dst, 1, make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	w.within(t, func() {
		if _, err := keep.Wait(); err != nil {
			t.Errorf("send on B: %v", err)
		}
		if _, err := hello.Wait(); err != nil {
			t.Errorf("hello: %v", err)
		}
	}, func() {
		if _, err := rcv.Probe(b, src, 9); err != nil {
			t.Errorf("probe: %v", err)
		}
		r, err := rcv.Isend(b, src, 1, []byte("hello"), false)
		if err == nil {
			_, err = r.Wait()
		}
		if err != nil {
			t.Errorf("hello: %v", err)
		}
	})
	for i := range offers {
		if ok, _, err := rcv.Iprobe(a, src, i); !ok || err != nil {
			t.Fatalf("offer %d has not arrived: %v %v", i, ok, err)
		}
	}
	snd.Close()
	// From here on the receiver must not poll: it would read the closed
	// connection's end and fail the sender before Revoke's refusals.
	rcv.mu.Lock()
	half := header{kind: kEager, ctx: a, tag: 7, length: 100}
	var bh btl.Header
	half.encode(&bh)
	Handler(rcv).Begin(src, &bh, 100)
	rcv.mu.Unlock()
	rcv.Revoke(a, fmt.Errorf("test revoke: %w", ErrRevoked))
	rcv.mu.Lock()
	failed := rcv.failed[src]
	nA := 0
	if q := rcv.mq[a]; q != nil {
		nA = q.unexp.len() + q.posted.len()
		for i, u := range q.unexp.items() {
			if u == nil {
				t.Errorf("context A's unexpected queue holds a nil entry at %d", i)
			}
		}
	}
	rcv.mu.Unlock()
	if failed == nil {
		t.Fatalf("no refusal's write failed: the sender's closed socket was not noticed, and the case was not exercised")
	}
	if nA != 0 {
		t.Errorf("context A holds %d entries after its revoke, want 0", nA)
	}
	// B's message, arrived before the failure, is still received.
	buf := make([]byte, 16)
	r, err := rcv.Irecv(b, src, 9, buf)
	if err != nil {
		t.Fatalf("receive of B's message after the sender's failure: %v", err)
	}
	st, err := r.Wait()
	checkRecv(t, "B's message after the sender's failure", st, err, buf, src, 9, pattern(9, 10))
	if _, err := rcv.Irecv(b, src, 9, buf); !errors.Is(err, ErrProcFailed) {
		t.Errorf("receive from the failed sender: %v, want ErrProcFailed", err)
	}
}

// postRecv posts a receive of size bytes on (ctx, s, tag) at e; an error
// fails the test and gives a nil request.
func postRecv(t *testing.T, e *Engine, ctx uint32, s, tag, size int) (*Request, []byte) {
	buf := make([]byte, size)
	r, err := e.Irecv(ctx, s, tag, buf)
	if err != nil {
		t.Errorf("receive (%d, %d, %d): %v", ctx, s, tag, err)
	}
	return r, buf
}

// waitRecv waits for r (nil: posting it failed) and checks that it got m
// from src.
func waitRecv(t *testing.T, what string, r *Request, buf []byte, src int, m msg) {
	if r == nil {
		return
	}
	st, err := r.Wait()
	checkRecv(t, what, st, err, buf, src, m.tag, m.data)
}
