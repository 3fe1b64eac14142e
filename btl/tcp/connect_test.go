package tcp

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/btl/btltest"
	"golang.org/x/sys/unix"
)

// sendBound is how long a Send to a peer that does not answer may take.
// A non-blocking Send takes microseconds; the blocking dial it replaces
// took up to 10 s. The bound is generous so that it cannot flake: this is
// a test of not blocking, not a benchmark.
const sendBound = time.Second

// results records each frame's completion.
type results struct {
	errs []error
}

func (r *results) FrameDone(f *btl.Frame, err error) { r.errs = append(r.errs, err) }

// silentListener accepts connections and never says a word.
func silentListener(t *testing.T) string { return btltest.SilentListener(t, "127.0.0.1") }

// idleListener listens and never accepts: the kernel completes the TCP
// handshake (the backlog has room), and nobody reads.
func idleListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// fullListener listens with a backlog of 0, never accepts, and fills its
// accept queue, so that the kernel drops further SYNs: a connect to it
// stays in progress. It skips the test where no connect stays unanswered.
func fullListener(t *testing.T) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // this one was not answered: the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the kernel answered 8 connects to a listener with backlog 0 that never accepts")
	return ""
}

// refusingAddr is an address where nothing listens.
func refusingAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// wrongSecretListener runs the acceptor's handshake with another job's
// secret: it rejects our proof and hangs up.
func wrongSecretListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, _, err := acceptHandshake(c, deriveKey([]byte("another job")), 2, 3, 5*time.Second, nil); err == nil {
					t.Error("a handshake with the wrong secret succeeded")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestStrangerDoesNotBlock sends to a "rank 2" that does not complete the
// handshake and checks that Send returns at once, that rank 1's frames
// flow meanwhile, and that the stranger's frames then fail, with the peer
// reported failed once.
func TestStrangerDoesNotBlock(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name     string
		addr     func(*testing.T) string
		fast     bool   // fails before the timeout
		phase    string // in the error
		sentinel error  // the error wraps it
	}{
		{"accepts-silent", silentListener, false, "no challenge", os.ErrDeadlineExceeded},
		{"never-accepts", idleListener, false, "no challenge", os.ErrDeadlineExceeded},
		{"drops-syn", fullListener, false, "connect not answered", os.ErrDeadlineExceeded},
		{"refuses", refusingAddr, true, "connect to rank 2", syscall.ECONNREFUSED},
		{"wrong-secret", wrongSecretListener, true, "no reply to our proof", errPeerClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GORUN_TCP_CONNECT_TIMEOUT", timeout.String())
			stranger := tc.addr(t)
			secret := []byte("strangers")
			rec0, rec1 := &recorder{}, &recorder{}
			a := openSized(t, 0, 3, secret, rec0)
			b := openSized(t, 1, 3, secret, rec1)
			if a.connTimeout != timeout {
				t.Fatalf("GORUN_TCP_CONNECT_TIMEOUT=%v gave %v", timeout, a.connTimeout)
			}
			toB, err := a.Reach(btl.Peer{Rank: 1, Addrs: map[string][]byte{"tcp": b.Address()}})
			if err != nil {
				t.Fatal(err)
			}
			toS, err := a.Reach(btl.Peer{Rank: 2, Addrs: map[string][]byte{"tcp": []byte(stranger)}})
			if err != nil {
				t.Fatal(err)
			}
			sres := &results{}
			t0 := time.Now()
			for _, n := range []int{5, 1 << 20} {
				if err := toS.Send(&btl.Frame{Payload: make([]byte, n), Owner: sres}); err != nil {
					t.Fatalf("Send to the stranger: %v", err)
				}
			}
			if d := time.Since(t0); d > sendBound {
				t.Fatalf("two Sends to a stranger that does not answer took %v: Send blocks on the network", d)
			}

			// Rank 1's traffic flows while the stranger is pending; no
			// Progress call waits on the stranger either.
			const frames = 200
			bres := &results{}
			var slowest time.Duration
			for range frames {
				if err := toB.Send(&btl.Frame{Payload: []byte("x"), Owner: bres}); err != nil {
					t.Fatal(err)
				}
			}
			ok := progressUntil(b, func() bool {
				p0 := time.Now()
				a.Progress()
				slowest = max(slowest, time.Since(p0))
				return len(rec1.frames) == frames
			})
			if !ok {
				t.Fatalf("rank 1 got %d of %d frames while the stranger was pending", len(rec1.frames), frames)
			}
			if slowest > sendBound {
				t.Fatalf("a Progress call took %v: it waits on the stranger", slowest)
			}
			oc := a.out[2]
			if !tc.fast && time.Since(t0) < timeout && (oc.state == stFailed || oc.state == stReady) {
				t.Fatalf("stranger's connection in state %d after %v", oc.state, time.Since(t0))
			}

			// Then the stranger's frames fail, once each, and so does
			// the peer.
			if !progressUntil(a, func() bool { return len(sres.errs) == 2 }) {
				t.Fatalf("stranger's frames: %d of 2 completed, connection in state %d", len(sres.errs), oc.state)
			}
			d := time.Since(t0)
			for _, err := range sres.errs {
				if err == nil {
					t.Fatal("a frame to the stranger completed without error")
				}
			}
			err = sres.errs[0]
			t.Logf("after %v: %v", d.Round(time.Millisecond), err)
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.phase) {
				t.Errorf("error %q: want %q wrapping %v", err, tc.phase, tc.sentinel)
			}
			if !tc.fast && d < timeout {
				t.Errorf("frames failed after %v, before the connect timeout %v", d, timeout)
			}
			if len(rec0.ranks) != 1 || rec0.ranks[0] != 2 || rec0.failed[0] != err {
				t.Errorf("PeerFailed calls for ranks %v (%v), want rank 2 once with the frames' error", rec0.ranks, rec0.failed)
			}
			if err := toS.Send(&btl.Frame{Owner: sres}); err == nil {
				t.Error("Send to the failed stranger accepted a frame")
			}
			for _, o := range a.busy {
				if o == oc {
					t.Error("failed connection left on the busy list")
				}
			}

			// Rank 1 is unaffected.
			if err := toB.Send(&btl.Frame{Payload: []byte("y"), Owner: bres}); err != nil {
				t.Fatal(err)
			}
			if !progressUntil(b, func() bool { a.Progress(); return len(rec1.frames) == frames+1 }) {
				t.Fatal("rank 1's frame after the stranger failed did not arrive")
			}
			for _, err := range bres.errs {
				if err != nil {
					t.Fatalf("a frame to rank 1 failed: %v", err)
				}
			}
		})
	}
}

// TestWaitWatchesConnects checks that Wait wakes up for each step of the
// connect and the handshake (POLLOUT while connecting or sending the
// proof, POLLIN while awaiting the acceptor), instead of sleeping through
// its whole duration.
func TestWaitWatchesConnects(t *testing.T) {
	secret := []byte("wait")
	a := open(t, 0, secret, &recorder{})
	rec := &recorder{}
	b := open(t, 1, secret, rec)
	ep, err := a.Reach(btl.Peer{Rank: 1, Addrs: map[string][]byte{"tcp": b.Address()}})
	if err != nil {
		t.Fatal(err)
	}
	res := &results{}
	if err := ep.Send(&btl.Frame{Payload: []byte("hi"), Owner: res}); err != nil {
		t.Fatal(err)
	}
	oc := a.out[1]
	for steps := 0; oc.state != stReady; steps++ {
		if oc.state == stFailed || steps > 20 {
			t.Fatalf("connection in state %d after %d steps: %v", oc.state, steps, oc.err)
		}
		s := oc.state
		t0 := time.Now()
		a.Wait(10 * time.Second)
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("Wait slept %v in state %d: it does not watch connecting sockets", d, s)
		}
		a.Progress()
	}
	if !progressUntil(b, func() bool { a.Progress(); return len(rec.frames) == 1 }) || len(res.errs) != 1 || res.errs[0] != nil {
		t.Fatalf("frame queued while connecting: received %d, completions %v", len(rec.frames), res.errs)
	}
}

// TestSilentDialersDoNotBlock: strangers that connect to a module and say
// nothing do not delay a real peer's connection, and are hung up on once
// the connect timeout passes.
func TestSilentDialersDoNotBlock(t *testing.T) {
	const timeout = time.Second
	t.Setenv("GORUN_TCP_CONNECT_TIMEOUT", timeout.String())
	secret := []byte("silent")
	rec := &recorder{}
	a := openSized(t, 1, 3, secret, rec)
	var strangers []net.Conn
	for range 16 {
		c, err := net.Dial("tcp", string(a.Address()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		strangers = append(strangers, c)
	}
	t0 := time.Now()
	b := openSized(t, 0, 3, secret, &recorder{})
	ep, err := b.Reach(btl.Peer{Rank: 1, Addrs: map[string][]byte{"tcp": a.Address()}})
	if err != nil {
		t.Fatal(err)
	}
	const frames = 100
	res := &results{}
	for range frames {
		if err := ep.Send(&btl.Frame{Payload: []byte("z"), Owner: res}); err != nil {
			t.Fatal(err)
		}
	}
	if !progressUntil(a, func() bool { b.Progress(); return len(rec.frames) == frames }) {
		t.Fatalf("rank 0's frames: %d of %d arrived while 16 strangers were connected", len(rec.frames), frames)
	}
	d := time.Since(t0)
	t.Logf("rank 0's %d frames arrived after %v, with 16 silent strangers connected", frames, d.Round(time.Microsecond))
	if d >= timeout {
		t.Errorf("rank 0's frames took %v, not less than the strangers' handshake timeout %v: they waited for the strangers", d, timeout)
	}
	for _, c := range strangers {
		expectClosed(t, a, c)
	}
	if len(rec.failed) != 0 || len(a.in) != 1 {
		t.Fatalf("failures %v, %d connections adopted (want only rank 0's)", rec.failed, len(a.in))
	}
	if !bytes.Equal(rec.frames[0], []byte("z")) {
		t.Fatalf("got %q", rec.frames[0])
	}
}
