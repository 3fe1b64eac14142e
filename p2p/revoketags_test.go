package p2p

import (
	"errors"
	"fmt"
	"testing"
)

// TestRevokeTags: revoking tags 32..63 of context A fails A's posted
// receive in the range, drops A's unexpected eager message in the range
// and refuses A's unexpected rendezvous offer in it (its sender completes
// with ErrRevoked); later receives, probes and sends in the range fail at
// once with the given error, and later messages in it are dropped or
// refused. A's messages outside the range, context B's messages with the
// same tags and AnyTag probes are untouched. Forgetting the range
// (UnrevokeTags) lets the tags work again.
func TestRevokeTags(t *testing.T) {
	const a, b = 31, 32
	const lo, hi = 32, 63
	eachWorld(t, func(t *testing.T, w *world) {
		big := w.eager + 1 // rendezvous
		early := []msg{
			{ctx: a, tag: 40, data: pattern(0, 10)},  // 0: unexpected eager in range: dropped
			{ctx: a, tag: 41, data: pattern(1, big)}, // 1: unexpected RTS in range: refused
			{ctx: a, tag: 64, data: pattern(2, 11)},  // 2: just past the range: kept
			{ctx: b, tag: 40, data: pattern(3, 12)},  // 3: other context, same tag: kept
		}
		late := []msg{
			{ctx: a, tag: 45, data: pattern(4, big)}, // 4: RTS after the revoke: refused
			{ctx: a, tag: 46, data: pattern(5, 13)},  // 5: eager after the revoke: dropped
			{ctx: a, tag: 70, data: pattern(6, 14)},  // 6: outside the range: received
			{ctx: a, tag: 33, data: pattern(7, 15)},  // 7: in the range once it is forgotten
		}
		refused := map[int]bool{1: true, 4: true}
		src, dst := w.src(), w.dst()
		posted, revoked, forgotten := make(chan struct{}), make(chan struct{}), make(chan struct{})
		revErr := fmt.Errorf("test revoke of tags %d..%d: %w", lo, hi, ErrRevoked)
		w.within(t, func() {
			e := w.sender()
			<-posted
			var rs []*Request
			refusedAt := map[int]bool{} // indexes in rs
			// On self the sender is the receiver, whose own sends in the
			// revoked range fail at once.
			self := e == w.receiver()
			isend := func(ms []msg, k0 int) bool {
				for k, m := range ms {
					r, err := e.Isend(m.ctx, dst, m.tag, m.data, false)
					if self && k0 == len(early) && k < 2 {
						if !errors.Is(err, revErr) {
							t.Errorf("send %d in the range on the revoking engine: %v, want %v", k0+k, err, revErr)
						}
						continue
					}
					refusedAt[len(rs)] = refused[k0+k]
					if err != nil {
						t.Errorf("send %d: %v", len(rs), err)
						return false
					}
					rs = append(rs, r)
				}
				return true
			}
			if !isend(early, 0) {
				return
			}
			waitProgress(e, revoked) // the rendezvous sends need their sender's polls
			if !isend(late[:3], len(early)) {
				return
			}
			waitProgress(e, forgotten)
			if !isend(late[3:], len(early)+3) {
				return
			}
			e.WaitAll(rs)
			for i, r := range rs {
				_, err := r.Result()
				switch {
				case refusedAt[i] && !errors.Is(err, ErrRevoked):
					t.Errorf("send %d (rendezvous in the revoked range): %v, want ErrRevoked", i, err)
				case !refusedAt[i] && err != nil:
					t.Errorf("send %d: %v", i, err)
				}
			}
		}, func() {
			e := w.receiver()
			recv := func(ctx uint32, s, tag int) (*Request, []byte) { return postRecv(t, e, ctx, s, tag, big) }
			check := func(what string, r *Request, buf []byte, m msg) { waitRecv(t, what, r, buf, src, m) }
			rIn, _ := recv(a, src, 33)
			close(posted)
			if t.Failed() {
				close(revoked)
				close(forgotten)
				return
			}
			// Per source the route is FIFO: once the last has arrived,
			// all have.
			if _, err := e.Probe(b, src, 40); err != nil {
				t.Errorf("probe: %v", err)
			}
			e.RevokeTags(a, lo, hi, revErr)
			if !rIn.Done() {
				t.Errorf("posted receive in the range is still pending after the revoke")
			} else if _, err := rIn.Result(); !errors.Is(err, revErr) {
				t.Errorf("posted receive in the range: %v, want %v", err, revErr)
			}
			if ok, _, err := e.Iprobe(a, src, 40); ok || !errors.Is(err, revErr) {
				t.Errorf("probe in the range: %v %v, want %v", ok, err, revErr)
			}
			if _, err := e.Irecv(a, src, 50, nil); !errors.Is(err, revErr) {
				t.Errorf("receive in the range after the revoke: %v, want %v", err, revErr)
			}
			if _, err := e.Isend(a, src, 50, nil, false); !errors.Is(err, revErr) {
				t.Errorf("send in the range after the revoke: %v, want %v", err, revErr)
			}
			ok, st, err := e.Iprobe(a, AnySource, AnyTag)
			if want := (Status{Source: src, Tag: 64, Bytes: len(early[2].data)}); !ok || err != nil || st != want {
				t.Errorf("AnyTag probe of A after the revoke: %v %+v %v, want %+v (the in-range messages dropped)", ok, st, err, want)
			}
			close(revoked)
			r, buf := recv(a, src, 64)
			check("A's message past the range", r, buf, early[2])
			r, buf = recv(b, src, 40)
			check("B's message with a revoked tag of A", r, buf, early[3])
			r, buf = recv(a, src, 70)
			check("A's message sent after the revoke, outside the range", r, buf, late[2])
			if ok, st, err := e.Iprobe(a, AnySource, AnyTag); ok || err != nil {
				t.Errorf("A holds a message after the revoke: %v %+v %v (late in-range messages must be dropped)", ok, st, err)
			}
			e.UnrevokeTags(a, lo, hi)
			close(forgotten)
			r, buf = recv(a, src, 33)
			check("A's message in the forgotten range", r, buf, late[3])
		})
	})
}

// TestRevokeTagsBounded: a context remembers its last maxRevokedRanges
// ranges; older ones are forgotten (their tags work again), and
// Unrevoke forgets them all.
func TestRevokeTagsBounded(t *testing.T) {
	w := openWorld(t, setups()[0])
	e := w.sender()
	const ctx = 41
	n := maxRevokedRanges + 3
	for i := range n {
		e.RevokeTags(ctx, 32*(i+1), 32*(i+1)+31, fmt.Errorf("range %d: %w", i, ErrRevoked))
	}
	e.mu.Lock()
	kept := len(e.revTags[ctx])
	e.mu.Unlock()
	if kept != maxRevokedRanges {
		t.Errorf("%d ranges kept, want %d", kept, maxRevokedRanges)
	}
	for i := range n {
		_, err := e.Irecv(ctx, AnySource, 32*(i+1), nil)
		if forgotten := i < n-maxRevokedRanges; forgotten != (err == nil) {
			t.Errorf("range %d (forgotten %v): receive: %v", i, forgotten, err)
		}
	}
	e.Unrevoke(ctx)
	if _, err := e.Irecv(ctx, AnySource, 32*n, nil); err != nil {
		t.Errorf("receive after Unrevoke: %v", err)
	}
	if e.revTags[ctx] != nil {
		t.Errorf("ranges kept after Unrevoke")
	}
}
