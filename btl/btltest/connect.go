package btltest

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/internal/params"
)

// sendBound is how long a Send to a peer that never answers may take. A
// Send that starts a non-blocking connect returns in microseconds; a
// blocking dial takes the transport's whole connect timeout (10 s for
// tcp). The bound is generous so that it cannot flake: the case checks
// that Send does not block, it measures nothing.
const sendBound = time.Second

// strangerTimeout is what the case sets the transport's connect timeout
// to (GORUN_<NAME>_CONNECT_TIMEOUT, where declared): long against the
// round trips that must complete meanwhile (~50 ms here), short enough
// to keep the case quick.
const strangerTimeout = 2 * time.Second

// roundTrips is how many round trips between ranks 0 and 1 must complete
// while the strangers are pending.
const roundTrips = 1000

// A stranger is a fake rank whose published address is a socket that
// never answers the transport's handshake.
type stranger struct {
	rank int
	what string // for messages
	addr string
}

// strangers listens, next to host, on two sockets that never answer: one
// never accepts (the kernel completes the TCP handshake into the backlog
// and nobody reads), one accepts and stays silent. Cleanup closes them.
func strangers(t *testing.T, host string) []stranger {
	idle, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idle.Close() })
	return []stranger{
		{2, "listens and never accepts", idle.Addr().String()},
		{3, "accepts and never speaks", SilentListener(t, host)},
	}
}

// SilentListener listens on host, accepts every connection and never says
// a word: a stranger for tests of connects and handshakes. It returns the
// address; Cleanup closes the listener and the connections.
func SilentListener(t testing.TB, host string) string {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// hostPort returns the host of a transport address of the form
// host:port, or false.
func hostPort(a []byte) (string, bool) {
	host, port, err := net.SplitHostPort(string(a))
	if err != nil {
		return "", false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return host, err == nil
}

// testConnect: rank 0 of a four-rank job sends to ranks 2 and 3, whose
// published addresses are sockets that never answer. Each Send returns at
// once; 1000 round trips between ranks 0 and 1 complete meanwhile, with
// no call into rank 0's module holding its lock for long; and the frames
// to the strangers then fail, with PeerFailed for each, instead of
// hanging. Transports whose address is not host:port cannot be given a
// stranger and skip.
func testConnect(t *testing.T, tr Transport) {
	knob := "GORUN_" + strings.ToUpper(tr.Name) + "_CONNECT_TIMEOUT"
	shortened := slices.ContainsFunc(params.All(), func(p params.Param) bool { return p.Name == knob })
	if shortened {
		t.Setenv(knob, strangerTimeout.String())
	}
	nodes := tr.worldOf(t, 4, 2)
	a, b := nodes[0], nodes[1]
	host, ok := hostPort(a.mod.Address())
	if !ok {
		t.Skipf("address %q is not host:port: the transport cannot be pointed at a stranger's socket", a.mod.Address())
	}
	ss := strangers(t, host)
	for _, s := range ss {
		ep, err := a.mod.Reach(btl.Peer{Rank: s.rank, HostID: "btltest-stranger", Addrs: map[string][]byte{tr.Name: []byte(s.addr)}})
		if err != nil || ep == nil {
			t.Skipf("rank 0: reach rank %d at %s: %v, endpoint %v: the transport does not reach a stranger's socket", s.rank, s.addr, err, ep)
		}
		a.eps[s.rank] = ep
	}

	// Send to the strangers: a small frame and one past the eager limit
	// each, queued behind a connect that will not finish.
	a.mu.Lock()
	start := time.Now()
	for _, s := range ss {
		for _, n := range []int{100, a.mod.Caps().EagerLimit + 1} {
			t0 := time.Now()
			err := a.send(s.rank, n)
			if d := time.Since(t0); d > sendBound {
				a.mu.Unlock()
				t.Fatalf("Send of %d bytes to rank %d at %s, a stranger that %s, took %v: Send blocks on the network (btl/doc.go)", n, s.rank, s.addr, s.what, d.Round(time.Millisecond))
			}
			if err != nil {
				a.mu.Unlock()
				t.Fatalf("Send to rank %d: %v", s.rank, err)
			}
		}
	}
	toStrangers := a.outstanding()
	a.mu.Unlock()

	// Round trips between ranks 0 and 1 while the strangers are pending.
	// The gap between two steps of rank 0 is the time its lock was held
	// by Progress, Wait and the idler: a call waiting on a stranger shows.
	var gap time.Duration
	last := time.Now()
	drive(t, caseTimeout, nodes, func(nd *node) (bool, error) {
		if err := nd.rec.failed[1-nd.rank]; err != nil {
			return false, fmt.Errorf("rank %d: PeerFailed(%d) during the round trips: %v", nd.rank, 1-nd.rank, err)
		}
		if nd.rank == 1 {
			if nd.snt.next[0] < nd.rec.got[0] {
				if err := nd.send(0, 8); err != nil {
					return false, err
				}
			}
			return nd.snt.next[0] == roundTrips, nil
		}
		gap = max(gap, time.Since(last))
		last = time.Now()
		if nd.snt.next[1] == nd.rec.got[1] && nd.snt.next[1] < roundTrips {
			if err := nd.send(1, 8); err != nil {
				return false, err
			}
		}
		return nd.rec.got[1] == roundTrips, nil
	})
	trips := time.Since(start)
	a.mu.Lock()
	sentOK, fails := a.snt.ok, a.snt.fails
	a.mu.Unlock()
	t.Logf("%d round trips between ranks 0 and 1 in %v while %d frames to the strangers were queued; rank 0's lock held for at most %v at a time",
		roundTrips, trips.Round(time.Millisecond), toStrangers, gap.Round(time.Microsecond))
	if gap > sendBound {
		t.Errorf("rank 0's module held the lock for %v at once while strangers were pending: something waits on the network", gap.Round(time.Millisecond))
	}
	if sentOK > roundTrips {
		t.Fatal("a frame to a stranger that never answered completed without error")
	}
	switch {
	case len(fails) > 0 && shortened:
		t.Fatalf("a frame to a stranger ended (%v) before %d round trips did (%v, %s=%v): the case proves nothing on a machine this slow",
			fails[0], roundTrips, trips.Round(time.Millisecond), knob, strangerTimeout)
	case len(fails) > 0:
		t.Logf("a frame to a stranger ended (%v) before the round trips did", fails[0])
	}

	// Then the strangers' frames fail instead of hanging, and each
	// stranger is reported failed.
	drive(t, caseTimeout, []*node{a}, func(nd *node) (bool, error) {
		if nd.snt.ok > roundTrips {
			return false, fmt.Errorf("a frame to a stranger that never answered completed without error")
		}
		if nd.outstanding() > 0 {
			return false, nil
		}
		for _, s := range ss {
			if nd.rec.failed[s.rank] == nil {
				return false, nil
			}
		}
		return true, nil
	})
	took := time.Since(start)
	t.Logf("after %v the %d frames to the strangers failed, the first with: %v", took.Round(time.Millisecond), toStrangers, a.snt.fails[0])
	if len(a.snt.fails) != toStrangers {
		t.Fatalf("%d frames to the strangers failed, %d were sent", len(a.snt.fails), toStrangers)
	}
	for _, s := range ss {
		t.Logf("PeerFailed(%d), a stranger that %s: %v", s.rank, s.what, a.rec.failed[s.rank])
	}
	if a.rec.failed[1] != nil || b.rec.failed[0] != nil {
		t.Fatalf("ranks 0 and 1 failed each other: %v, %v", a.rec.failed[1], b.rec.failed[0])
	}
}
