package coll

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
	_ "github.com/gorun/gorun/btl/tcp"
	"github.com/gorun/gorun/p2p"
)

// openEngines attaches size engines of this process to each other over
// btl/tcp (real sockets on loopback), as mpi.Init does; Cleanup closes
// them.
func openEngines(t testing.TB, size int) []*p2p.Engine {
	t.Helper()
	return openEnginesOn(t, size, "tcp")
}

// openEnginesOn is openEngines over the transports of filter.
func openEnginesOn(t testing.TB, size int, filter string) []*p2p.Engine {
	t.Helper()
	f, err := btl.ParseFilter(filter)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	job := fmt.Sprintf("colltest%d", os.Getpid())
	engs := make([]*p2p.Engine, size)
	mods := make([][]btl.Module, size)
	t.Cleanup(func() {
		for _, e := range engs {
			if e != nil {
				e.Close()
			}
		}
	})
	for r := range size {
		engs[r] = p2p.Alloc(r, size)
		ms, skipped, err := btl.OpenAll(btl.Env{Rank: r, Size: size, JobID: job, HostID: "colltest-host", Secret: secret, Handler: p2p.Handler(engs[r])}, f)
		if err != nil {
			t.Fatalf("rank %d: open %s: %v (%v)", r, filter, err, skipped)
		}
		mods[r] = ms
	}
	peers := make([]btl.Peer, size)
	for r := range peers {
		addrs := map[string][]byte{}
		for _, m := range mods[r] {
			addrs[m.Name()] = m.Address()
		}
		peers[r] = btl.Peer{Rank: r, HostID: "colltest-host", PID: os.Getpid(), Addrs: addrs}
	}
	for r, e := range engs {
		if err := e.Attach(mods[r], peers); err != nil {
			t.Fatal(err)
		}
	}
	return engs
}

// ranks runs fn for every rank in a goroutine of its own; a rank done with
// fn goes on polling its engine until all are, as a real rank would in its
// next calls. Past a minute the engines are closed (the stuck calls end
// with ErrClosed) and the test fails with every goroutine's stack.
func ranks(t testing.TB, engs []*p2p.Engine, fn func(r int)) {
	t.Helper()
	var wg sync.WaitGroup
	var left atomic.Int32
	left.Store(int32(len(engs)))
	for r, e := range engs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(r)
			left.Add(-1)
			for left.Load() > 0 {
				e.Progress()
				runtime.Gosched()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		buf := make([]byte, 1<<20)
		st := string(buf[:runtime.Stack(buf, true)])
		for _, e := range engs {
			e.Close()
		}
		<-done
		t.Fatalf("still running after a minute: a hang\n%s", st)
	}
}

// TestAbortRevokesCall: rank 0 aborts a call while rank 1 has a
// rendezvous send of that call to rank 2 outstanding, which it waits on
// with the engine directly (no wait of notice.go watches it), and rank 2
// has the offer unexpected and waits in the call for rank 0. Rank 2 takes
// in the abort notice and revokes the call's tags: its wait fails with
// rank 0's *AbortedError and it refuses rank 1's offer, so that rank 1's
// send fails (ErrRevoked) instead of waiting forever; through the call's
// own wait (await) rank 1 sees rank 0's *AbortedError too. The next call
// on the communicator (a barrier, then a rendezvous-sized broadcast) works
// on every rank. Before the abort became a revoke, rank 1's send waited
// for a receive the aborted call never posts (here rank 2's receive after
// the abort, which now fails at once, would have taken it).
func TestAbortRevokesCall(t *testing.T) {
	const np, ctx = 3, 7
	engs := openEngines(t, np)
	world := []int{0, 1, 2}
	comms := make([]Comm, np)
	for r := range np {
		comms[r] = NewComm(engs[r], ctx, world, r, nil)
	}
	big := 1 << 20 // above tcp's eager limit: a rendezvous
	offered := make(chan struct{})
	cause := errors.New("test failure at rank 0")
	wantAbort := func(what string, err error) {
		var ae *AbortedError
		if !errors.As(err, &ae) || ae.Rank != 0 || ae.Class != 3 || ae.Reason != cause.Error() {
			t.Errorf("%s: %v, want rank 0's *AbortedError (class 3, %q)", what, err, cause)
		}
	}
	ranks(t, engs, func(r int) {
		v := comms[r].Begin()
		switch r {
		case 0:
			<-offered
			v.Abort(3, cause)
		case 1:
			sr, err := v.isend(make([]byte, big), 2)
			if err != nil {
				t.Errorf("rank 1: send: %v", err)
				return
			}
			if _, err := sr.Wait(); !errors.Is(err, p2p.ErrRevoked) {
				t.Errorf("rank 1: send waited on directly: %v, want ErrRevoked (refused)", err)
			}
			wantAbort("rank 1: the call's wait on the refused send", v.await(sr))
		case 2:
			rr, err := v.irecv(make([]byte, 8), 0)
			if err != nil {
				t.Errorf("rank 2: receive: %v", err)
				close(offered)
				return
			}
			if _, err := v.E.Probe(ctx, 1, v.tag); err != nil {
				t.Errorf("rank 2: probe of rank 1's offer: %v", err)
			}
			close(offered)
			wantAbort("rank 2: receive from rank 0", v.waitRecv(rr, 0, 8))
			if _, err := v.irecv(make([]byte, big), 1); !isAborted(err) {
				t.Errorf("rank 2: receive of the aborted call after its revoke: %v, want the *AbortedError", err)
			}
		}
	})
	ranks(t, engs, func(r int) {
		v := comms[r].Begin()
		if err := Barrier(&v, nil); err != nil {
			t.Errorf("rank %d: barrier after the aborted call: %v", r, err)
		}
		want := bytes.Repeat([]byte("bcast after abort"), big/16)
		buf := make([]byte, len(want))
		if r == 0 {
			copy(buf, want)
		}
		v = comms[r].Begin()
		if err := Bcast(&v, &Args{Recv: buf, Root: 0}); err != nil {
			t.Errorf("rank %d: bcast after the aborted call: %v", r, err)
		} else if !bytes.Equal(buf, want) {
			t.Errorf("rank %d: bcast after the aborted call: wrong bytes", r)
		}
	})
}
