package btltest

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun/gorun/btl"
)

// Transport describes the transport under test.
type Transport struct {
	// Name is the name the transport registers under (btl.Register); the
	// test's package imports it.
	Name string
	// Loopback marks a transport that reaches only its own rank (self):
	// the suite uses a one-rank job and skips the cases that need a peer.
	Loopback bool
	// Env, if set, adjusts the environment of every module opened (for
	// example BindAddr).
	Env func(*btl.Env)
}

// hostID is the host every module of the suite believes it is on.
const hostID = "btltest-host"

// Run runs the conformance suite against the transport.
func Run(t *testing.T, tr Transport) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild(tr))
	}
	cases := []struct {
		name string
		f    func(*testing.T, Transport)
		peer bool // needs a second rank
	}{
		{"sizes", testSizes, false},
		{"ordering", testOrdering, false},
		{"outstanding", testOutstanding, false},
		{"backpressure", testBackPressure, true},
		{"close", testClose, false},
		{"wait", testWait, true},
		{"death/sender", testSenderDies, true},
		{"death/receiver", testReceiverDies, true},
		{"connect", testConnect, true},
		{"rma/getput", testRMAGetPut, false},
		{"rma/bounds", testRMABounds, false},
		{"rma/death", testRMAPeerDies, true},
	}
	for _, c := range cases {
		if c.peer && tr.Loopback {
			continue
		}
		t.Run(c.name, func(t *testing.T) { c.f(t, tr) })
	}
}

// env returns the btl.Env of rank in a job of size ranks.
func (tr Transport) env(job string, rank, size int, secret []byte, h btl.Handler) btl.Env {
	e := btl.Env{Rank: rank, Size: size, JobID: job, HostID: hostID, Secret: secret, Handler: h}
	if tr.Env != nil {
		tr.Env(&e)
	}
	return e
}

// open opens the transport for rank through the registry, the way Init does.
func (tr Transport) open(env btl.Env) (btl.Module, error) {
	f, err := btl.ParseFilter(tr.Name)
	if err != nil {
		return nil, err
	}
	mods, skipped, err := btl.OpenAll(env, f)
	if err != nil {
		return nil, fmt.Errorf("open %s for rank %d: %w (%v)", tr.Name, env.Rank, err, skipped)
	}
	return mods[0], nil
}

// peerOf describes a node to the others.
func (tr Transport) peerOf(rank, pid int, addr []byte) btl.Peer {
	return btl.Peer{Rank: rank, HostID: hostID, PID: pid, Addrs: map[string][]byte{tr.Name: addr}}
}

// world opens the nodes of a case: two ranks reaching each other, or one
// reaching itself for a Loopback transport. Cleanup closes the modules and
// removes whatever the job left in /dev/shm, as the launcher does.
func (tr Transport) world(t testing.TB) []*node {
	t.Helper()
	size := 2
	if tr.Loopback {
		size = 1
	}
	return tr.worldOf(t, size, size)
}

// worldOf opens ranks 0 to n-1 of a job of size ranks, reaching each
// other as world does; the ranks from n on are the case's to play.
func (tr Transport) worldOf(t testing.TB, size, n int) []*node {
	t.Helper()
	job := newJob()
	secret := make([]byte, 32)
	rand.Read(secret)
	nodes := make([]*node, n)
	for r := range nodes {
		nd := &node{rank: r, eps: map[int]btl.Endpoint{}}
		nd.rec.init(nd)
		nd.snt.init(nd)
		m, err := tr.open(tr.env(job, r, size, secret, &nd.rec))
		if err != nil {
			t.Fatal(err)
		}
		nd.mod = m
		nodes[r] = nd
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.mu.Lock()
			if !nd.closed {
				nd.mod.Close()
			}
			nd.mu.Unlock()
		}
		left, _ := filepath.Glob("/dev/shm/gorun-" + job + "-*")
		if len(left) > 0 {
			t.Errorf("closed modules left %v in /dev/shm", left)
		}
		for _, f := range left {
			os.Remove(f)
		}
	})
	for _, a := range nodes {
		for _, b := range nodes {
			if n > 1 && a == b {
				continue
			}
			ep, err := a.mod.Reach(tr.peerOf(b.rank, os.Getpid(), b.mod.Address()))
			if err != nil || ep == nil {
				t.Fatalf("rank %d: reach rank %d: %v, endpoint %v", a.rank, b.rank, err, ep)
			}
			a.eps[b.rank] = ep
		}
	}
	return nodes
}

// peerOfNode is the rank a node sends to: the other one, or itself.
func peerOfNode(nodes []*node, nd *node) int {
	if len(nodes) == 1 {
		return nd.rank
	}
	return 1 - nd.rank
}
