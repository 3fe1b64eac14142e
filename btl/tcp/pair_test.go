package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
)

// pairOf opens ranks 0 and 1 of a job and their endpoints to each other.
func pairOf(t *testing.T) (mods [2]*module, eps [2]btl.Endpoint, recs [2]*bySource) {
	t.Helper()
	secret := bytes.Repeat([]byte{5}, 32)
	for r := range 2 {
		recs[r] = &bySource{frames: map[int][][]byte{}, failed: map[int]error{}}
		mods[r] = openSized(t, r, 2, secret, recs[r])
	}
	for r := range 2 {
		ep, err := mods[r].Reach(btl.Peer{Rank: 1 - r, Addrs: map[string][]byte{"tcp": mods[1-r].Address()}})
		if err != nil {
			t.Fatal(err)
		}
		eps[r] = ep
	}
	return
}

// TestOneConnectionAPair: two ranks that send to each other share one
// connection, whichever sends first and when both dial at once (the lower
// rank's dial wins; the other is refused before any frame goes on it),
// and each one's frames arrive whole and in order. Before, each rank sent
// on a connection it dialed and read those it accepted: two a pair, and
// a receiver's acknowledgements went back as segments of their own (an
// np=2 ping-pong over loopback sent 1.5 segments a message). Orders:
// lower/higher, one rank's frames arrive before the other sends (which
// then writes the connection it took); higher/pending, rank 1's dial is
// taken but not yet adopted when rank 0 sends (it waits for it, stAwait);
// both/refused and both/taken, both dial before either polls, rank 1's
// dial refused before rank 0's connection reaches it or after.
func TestOneConnectionAPair(t *testing.T) {
	for _, order := range []string{"lower", "higher", "higher/pending", "both/refused", "both/taken"} {
		t.Run(order, func(t *testing.T) {
			mods, eps, recs := pairOf(t)
			d := &done{}
			const n = 50
			sent := [2]int{}
			send := func(r int) {
				i := sent[r]
				sent[r]++
				p := bytes.Repeat([]byte{byte(r)}, 16+(i*5311)%(3*directRead))
				copy(p, fmt.Sprintf("%d:%d:", r, i))
				if err := eps[r].Send(&btl.Frame{Payload: p, Owner: d}); err != nil {
					t.Fatal(err)
				}
			}
			both := func(cond func() bool) bool {
				return progressUntil(mods[0], func() bool { mods[1].Progress(); return cond() })
			}
			switch order {
			case "lower", "higher":
				r := map[string]int{"lower": 0, "higher": 1}[order]
				send(r)
				if !both(func() bool { return len(recs[1-r].frames[r]) == 1 }) {
					t.Fatal("the first frame never arrived")
				}
				if mods[1-r].out[r].state != stReady {
					t.Fatalf("rank %d took rank %d's connection but cannot write it: state %d", 1-r, r, mods[1-r].out[r].state)
				}
			case "higher/pending":
				send(1)
				if !progressUntil(mods[1], func() bool { return mods[1].out[0].state == stReady }) {
					t.Fatalf("rank 1's dial was not taken: state %d", mods[1].out[0].state)
				}
				send(0)
				if mods[0].out[1].state != stAwait {
					t.Fatalf("rank 0, which took rank 1's dial, did not wait for it: state %d", mods[0].out[1].state)
				}
			default:
				send(0)
				send(1)
				if order == "both/refused" {
					// Rank 1's dial is refused (rank 0 dialed too) before
					// rank 0's connection reaches it: it waits for it.
					if !progressUntil(mods[1], func() bool { return mods[1].out[0].state == stAwait }) {
						t.Fatalf("rank 1's dial was not refused: state %d", mods[1].out[0].state)
					}
				} else {
					// Rank 0's connection is taken while rank 1's own dial
					// is under way: rank 1 drops its dial for it.
					if !progressUntil(mods[0], func() bool { return mods[0].out[1].state == stReady }) {
						t.Fatalf("rank 0's dial was not taken: state %d", mods[0].out[1].state)
					}
				}
			}
			for r := range 2 {
				for sent[r] < n {
					send(r)
				}
			}
			if !both(func() bool { return len(recs[0].frames[1]) == n && len(recs[1].frames[0]) == n }) {
				t.Fatalf("frames: %d at rank 0, %d at rank 1; failures %v %v", len(recs[0].frames[1]), len(recs[1].frames[0]), recs[0].failed, recs[1].failed)
			}
			for r := range 2 {
				for i, f := range recs[1-r].frames[r] {
					if want := fmt.Sprintf("%d:%d:", r, i); !strings.HasPrefix(string(f), want) {
						t.Fatalf("rank %d's frame %d from rank %d begins %q, want %q", 1-r, i, r, f[:min(len(f), 8)], want)
					}
				}
				if len(mods[r].in) != 1 || mods[r].out[1-r].in != mods[r].in[0] || mods[r].in[0].fd != mods[r].out[1-r].fd {
					t.Fatalf("rank %d: %d connections read; the one written is not one of them", r, len(mods[r].in))
				}
			}
			if d.n != 2*n || len(recs[0].failed)+len(recs[1].failed) != 0 {
				t.Fatalf("%d of %d frames completed; failures %v %v", d.n, 2*n, recs[0].failed, recs[1].failed)
			}
		})
	}
}

// TestPairFailsBothWays: when the connection fails on its reading side
// while a large frame to the peer is queued (the peer reads none of it),
// it fails for writing too: the peer is reported failed once, the queued
// frame completes with the error, later Progress calls go on, and a later
// Send fails. The reading side fails on a frame the handler refuses
// (deterministic: it is read while the write waits) or on the peer's
// close. A connection failed on its reading side while on the busy list
// made the next Progress dereference its cleared state.
func TestPairFailsBothWays(t *testing.T) {
	for _, how := range []string{"refused", "closed"} {
		t.Run(how, func(t *testing.T) {
			mods, eps, recs := pairOf(t)
			fails := 0
			mods[0].env.Handler = countFails{recs[0], &fails}
			d := &done{}
			eps[1].Send(&btl.Frame{Payload: []byte("hi"), Owner: d})
			if !progressUntil(mods[0], func() bool { mods[1].Progress(); return len(recs[0].frames[1]) == 1 }) {
				t.Fatal("frame never arrived")
			}
			var bigErr error
			bigDone := false
			eps[0].Send(&btl.Frame{Payload: make([]byte, 64<<20), Owner: ownerFunc(func(err error) { bigErr, bigDone = err, true })})
			mods[0].Progress()
			if bigDone || len(mods[0].busy) != 1 {
				t.Fatalf("the large frame should be queued: done %v, %d busy", bigDone, len(mods[0].busy))
			}
			if how == "refused" {
				// Written at once (the connection is ready and idle):
				// rank 1 reads nothing meanwhile.
				eps[1].Send(&btl.Frame{Payload: []byte(refuseMe), Owner: d})
			} else {
				mods[1].Close()
			}
			if !progressUntil(mods[0], func() bool { return fails > 0 && bigDone }) {
				t.Fatalf("the failure was not reported (%d) or the queued frame not completed (%v)", fails, bigDone)
			}
			for range 3 {
				mods[0].Progress()
			}
			if fails != 1 || bigErr == nil || len(mods[0].busy) != 0 {
				t.Fatalf("%d failures reported (want 1), queued frame ended with %v, %d busy", fails, bigErr, len(mods[0].busy))
			}
			var got error
			f := &btl.Frame{Payload: []byte("late"), Owner: ownerFunc(func(err error) { got = err })}
			if err := eps[0].Send(f); err == nil && got == nil {
				t.Fatal("a send on the failed connection neither failed nor completed with an error")
			}
			if len(mods[0].in) != 0 {
				t.Fatalf("%d connections still read", len(mods[0].in))
			}
		})
	}
}

// refuseMe is a payload countFails refuses (Begin gives no buffer).
const refuseMe = "refuse me"

// countFails counts PeerFailed reports and refuses refuseMe's frames,
// passing every other call on.
type countFails struct {
	*bySource
	n *int
}

func (c countFails) Begin(src int, h *btl.Header, n int) []byte {
	if n == len(refuseMe) {
		return nil
	}
	return c.bySource.Begin(src, h, n)
}

func (c countFails) PeerFailed(src int, err error) { *c.n++; c.bySource.PeerFailed(src, err) }

type ownerFunc func(error)

func (o ownerFunc) FrameDone(f *btl.Frame, err error) { o(err) }

// sendToRefuser opens rank self of a job of two with a peer that answers
// every dial with "no" and never dials back, sends it one frame and
// returns how the frame ended (failing the test if it never does) and
// the failures reported.
func sendToRefuser(t *testing.T, self int) (*recorder, error) {
	t.Helper()
	secret := bytes.Repeat([]byte{6}, 32)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		acceptHandshake(c, deriveKey(secret), 1-self, 2, 5*time.Second, func(int) bool { return false })
		time.Sleep(2 * time.Second)
	}()
	rec := &recorder{}
	m := open(t, self, secret, rec)
	ep, err := m.Reach(btl.Peer{Rank: 1 - self, Addrs: map[string][]byte{"tcp": []byte(ln.Addr().String())}})
	if err != nil {
		t.Fatal(err)
	}
	var got error
	ep.Send(&btl.Frame{Payload: []byte("x"), Owner: ownerFunc(func(err error) { got = err })})
	if !progressUntil(m, func() bool { return got != nil }) {
		t.Fatal("the frame never failed")
	}
	return rec, got
}

// TestRefusedDialWaits: a rank whose dial the lower-ranked peer refuses
// (it says it dialed too) waits for the peer's connection; when none
// comes within GORUN_TCP_CONNECT_TIMEOUT its frames fail naming that.
func TestRefusedDialWaits(t *testing.T) {
	t.Setenv("GORUN_TCP_CONNECT_TIMEOUT", "500ms")
	rec, got := sendToRefuser(t, 1)
	if !strings.Contains(got.Error(), "the peer did not connect") || len(rec.failed) != 1 {
		t.Fatalf("frame failed with %v; %d failures reported", got, len(rec.failed))
	}
}

// TestLowerRankRefusedFails: only a higher rank may be refused; a lower
// rank told "no" (what no acceptor of the job says to it) fails the
// connection as an authentication failure instead of waiting.
func TestLowerRankRefusedFails(t *testing.T) {
	if _, got := sendToRefuser(t, 0); !errors.Is(got, errAuth) {
		t.Fatalf("frame failed with %v, want an authentication failure", got)
	}
}
