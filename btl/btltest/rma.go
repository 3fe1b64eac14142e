package btltest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
)

// The RMA cases run for every module that implements btl.RMA: ranks
// register buffers, exchange their regions through the wire encoding (as
// p2p's RTS and CTS carry them) and Get and Put between them, driving
// Progress on both sides until every operation has reported RMADone.

// rmaSizes are region lengths around page and fragment edges.
var rmaSizes = []int{1, 7, 4095, 4096, 4097, 64<<10 + 3, 1<<20 + 1, 4 << 20}

// rmaDone counts RMADone calls per operation.
type rmaDone struct {
	calls map[*btl.RMAOp]int
	errs  map[*btl.RMAOp]error
}

func newRMADone() *rmaDone {
	return &rmaDone{calls: map[*btl.RMAOp]int{}, errs: map[*btl.RMAOp]error{}}
}

func (d *rmaDone) RMADone(op *btl.RMAOp, err error) {
	d.calls[op]++
	if err != nil {
		d.errs[op] = err
	}
}

// rmaOf returns the module's RMA capability, or skips the test.
func rmaOf(t *testing.T, nd *node, peer btl.Peer) btl.RMA {
	t.Helper()
	x, ok := nd.mod.(btl.RMA)
	if !ok {
		t.Skipf("%s has no RMA capability", nd.mod.Name())
	}
	nd.mu.Lock()
	k := x.RMAKinds(peer)
	nd.mu.Unlock()
	if !k.Has(btl.MemHost) {
		t.Skipf("%s offers no RMA on host memory with rank %d here (refused by the system?)", nd.mod.Name(), peer.Rank)
	}
	return x
}

// wire passes a region through its encoding, as a peer receives it.
func wire(t *testing.T, r *btl.Region) *btl.Region {
	t.Helper()
	if len(r.Key()) > btl.MaxKeySize {
		t.Fatalf("key of %d bytes", len(r.Key()))
	}
	b := make([]byte, btl.MaxRegionSize)
	n := r.Encode(b)
	var out btl.Region
	if err := btl.DecodeRegion(b[:n], &out); err != nil {
		t.Fatalf("a registered region does not decode: %v", err)
	}
	if out.Kind != r.Kind || out.Addr != r.Addr || out.Len != r.Len || !bytes.Equal(out.Key(), r.Key()) || out.Handle != nil {
		t.Fatalf("region changed on the wire: %+v -> %+v", r, out)
	}
	return &out
}

// register registers b with rank nd's module under its lock.
func register(t *testing.T, nd *node, x btl.RMA, b []byte) *btl.Region {
	t.Helper()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var r btl.Region
	if err := x.Register(btl.HostMem(b), &r); err != nil {
		t.Fatalf("rank %d: register %d bytes: %v", nd.rank, len(b), err)
	}
	if r.Kind != btl.MemHost || r.Len != uint64(len(b)) {
		t.Fatalf("rank %d: registered %d bytes as %+v", nd.rank, len(b), r)
	}
	return &r
}

// await starts ops on nd (Get where get[i]) and drives both nodes until
// each has completed once; it returns their errors.
func await(t *testing.T, nodes []*node, nd *node, x btl.RMA, ops []*btl.RMAOp, get []bool) []error {
	t.Helper()
	d := newRMADone()
	started := make([]bool, len(ops))
	drive(t, caseTimeout, nodes, func(n *node) (bool, error) {
		if n != nd {
			return true, nil
		}
		for i, op := range ops {
			if started[i] {
				continue
			}
			started[i] = true
			op.Owner = d
			var err error
			if get[i] {
				err = x.Get(op)
			} else {
				err = x.Put(op)
			}
			if err != nil {
				d.calls[op] = -1 // refused: no RMADone may follow
				d.errs[op] = err
			}
		}
		for _, op := range ops {
			switch c := d.calls[op]; {
			case c == 0:
				return false, nil
			case c > 1:
				return false, fmt.Errorf("RMADone called %d times for one operation", c)
			}
		}
		return true, nil
	})
	errs := make([]error, len(ops))
	for i, op := range ops {
		errs[i] = d.errs[op]
	}
	return errs
}

// testRMAGetPut: rank 1 registers a source and a destination of each
// size; rank 0 gets the source in two parts (at offset 0 and past the
// middle) and puts its copy into the destination in two parts, as p2p's
// split rendezvous does; both must hold the source's bytes, and the bytes
// around them must be untouched.
func testRMAGetPut(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	me, other := nodes[0], nodes[len(nodes)-1]
	x := rmaOf(t, me, tr.peerOf(other.rank, os.Getpid(), other.mod.Address()))
	xo := other.mod.(btl.RMA)
	for i, n := range rmaSizes {
		src := pattern(other.rank, i, n)
		// Guard bytes on both sides of the destination show stray writes.
		dstBuf := bytes.Repeat([]byte{0xA5}, n+128)
		dst := dstBuf[64 : 64+n]
		rs := wire(t, register(t, other, xo, src))
		rd := wire(t, register(t, other, xo, dst))
		got := make([]byte, n)
		half := n - n/2
		ops := []*btl.RMAOp{
			{Peer: other.rank, Local: btl.HostMem(got[:half]), Remote: rs},
			{Peer: other.rank, Local: btl.HostMem(got[half:]), Remote: rs, Offset: uint64(half)},
		}
		for j, err := range await(t, nodes, me, x, ops, []bool{true, true}) {
			if err != nil {
				t.Fatalf("size %d: get part %d: %v", n, j, err)
			}
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("size %d: Get delivered wrong bytes", n)
		}
		ops = []*btl.RMAOp{
			{Peer: other.rank, Local: btl.HostMem(got[half:]), Remote: rd, Offset: uint64(half)},
			{Peer: other.rank, Local: btl.HostMem(got[:half]), Remote: rd},
		}
		for j, err := range await(t, nodes, me, x, ops, []bool{false, false}) {
			if err != nil {
				t.Fatalf("size %d: put part %d: %v", n, j, err)
			}
		}
		if !bytes.Equal(dst, src) {
			t.Fatalf("size %d: Put delivered wrong bytes", n)
		}
		if bytes.Count(dstBuf[:64], []byte{0xA5}) != 64 || bytes.Count(dstBuf[64+n:], []byte{0xA5}) != 64 {
			t.Fatalf("size %d: Put wrote outside its region", n)
		}
		other.mu.Lock()
		xo.Deregister(rs)
		xo.Deregister(rd)
		other.mu.Unlock()
	}
}

// testRMABounds: accesses that leave the region fail (refused, or
// completed with an error) and move nothing; a region registered several
// times (modules cache registrations) stays usable until its last
// Deregister.
func testRMABounds(t *testing.T, tr Transport) {
	nodes := tr.world(t)
	me, other := nodes[0], nodes[len(nodes)-1]
	x := rmaOf(t, me, tr.peerOf(other.rank, os.Getpid(), other.mod.Address()))
	xo := other.mod.(btl.RMA)
	const n = 8192
	src := pattern(other.rank, 1, n)
	dstBuf := bytes.Repeat([]byte{0x5A}, 2*n)
	r1 := register(t, other, xo, src)
	r2 := register(t, other, xo, src)
	rs := wire(t, r1)
	rd := wire(t, register(t, other, xo, dstBuf[:n]))
	local := make([]byte, n+1)
	bad := []struct {
		name string
		op   *btl.RMAOp
		get  bool
	}{
		{"get one byte past the end", &btl.RMAOp{Peer: other.rank, Local: btl.HostMem(local[:n+1]), Remote: rs}, true},
		{"get at an offset past the end", &btl.RMAOp{Peer: other.rank, Local: btl.HostMem(local[:16]), Remote: rs, Offset: n - 8}, true},
		{"get at an offset beyond the region", &btl.RMAOp{Peer: other.rank, Local: btl.HostMem(local[:1]), Remote: rs, Offset: n + 1}, true},
		{"put one byte past the end", &btl.RMAOp{Peer: other.rank, Local: btl.HostMem(local[:n+1]), Remote: rd}, false},
		{"put with a huge offset", &btl.RMAOp{Peer: other.rank, Local: btl.HostMem(local[:8]), Remote: rd, Offset: 1<<64 - 4}, false},
	}
	for _, c := range bad {
		errs := await(t, nodes, me, x, []*btl.RMAOp{c.op}, []bool{c.get})
		if errs[0] == nil {
			t.Errorf("%s: succeeded", c.name)
		}
	}
	if bytes.Count(dstBuf, []byte{0x5A}) != len(dstBuf) {
		t.Error("a refused Put wrote into the peer's memory")
	}
	// One of the two registrations of src released: still usable.
	other.mu.Lock()
	xo.Deregister(r2)
	other.mu.Unlock()
	got := make([]byte, n)
	if errs := await(t, nodes, me, x, []*btl.RMAOp{{Peer: other.rank, Local: btl.HostMem(got), Remote: rs}}, []bool{true}); errs[0] != nil || !bytes.Equal(got, src) {
		t.Errorf("get after releasing one of two registrations: %v, bytes equal %v", errs[0], bytes.Equal(got, src))
	}
	other.mu.Lock()
	xo.Deregister(r1)
	other.mu.Unlock()
}

// lineRegion carries the child's registered region, encoded, to the parent.
const lineRegion = "btltest-region "

// rmaChild is the child's side of testRMAPeerDies: it registers a 64 MiB
// buffer, prints the region and polls until killed.
func rmaChild(nd *node) int {
	x, ok := nd.mod.(btl.RMA)
	if !ok {
		fmt.Println("btltest child: no RMA")
		return 2
	}
	var r btl.Region
	if err := x.Register(btl.HostMem(pattern(1, 0, maxFrame)), &r); err != nil {
		fmt.Println("btltest child: register:", err)
		return 2
	}
	b := make([]byte, btl.MaxRegionSize)
	fmt.Printf("%s%x\n", lineRegion, b[:r.Encode(b)])
	var id idler
	for {
		id.pass(nd, nd.progress())
	}
}

// testRMAPeerDies: the parent gets a 64 MiB region from the child again
// and again while the child is killed (SIGKILL). Every Get must end,
// done or failed, in bounded time, and once the child is dead a Get must
// fail (or be refused): never a hang, never success from a dead process.
func testRMAPeerDies(t *testing.T, tr Transport) {
	nd, c, p := tr.deathWorld(t, "rma")
	nd.mu.Lock()
	ep, err := nd.mod.Reach(p)
	nd.mu.Unlock()
	if err != nil || ep == nil {
		t.Fatalf("reach the child: %v %v", ep, err)
	}
	x := rmaOf(t, nd, p)
	var remote btl.Region
	timeout := time.After(deathTimeout)
	for remote.Len == 0 {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before publishing its region: %s", c.stderr.String())
			}
			if h, found := strings.CutPrefix(l, lineRegion); found {
				b, err := hex.DecodeString(h)
				if err != nil {
					t.Fatal(err)
				}
				if err := btl.DecodeRegion(b, &remote); err != nil {
					t.Fatalf("child's region: %v", err)
				}
			} else if strings.HasPrefix(l, "btltest child:") {
				t.Fatal(l)
			}
		case <-timeout:
			t.Fatalf("no region from the child in %v: %s", deathTimeout, c.stderr.String())
		}
	}
	dst := make([]byte, maxFrame)
	nodes := []*node{nd}
	// The first get, with the child alive, must succeed.
	if errs := await(t, nodes, nd, x, []*btl.RMAOp{{Peer: 1, Local: btl.HostMem(dst), Remote: &remote}}, []bool{true}); errs[0] != nil {
		t.Fatalf("get from the live child: %v", errs[0])
	}
	if !bytes.Equal(dst, pattern(1, 0, maxFrame)) {
		t.Fatal("get from the live child delivered wrong bytes")
	}
	// Kill it while gets run; the one after it is reaped must fail.
	go func() {
		time.Sleep(2 * time.Millisecond)
		c.cmd.Process.Signal(syscall.SIGKILL)
	}()
	start := time.Now()
	for i := 0; ; i++ {
		reaped := c.cmd.ProcessState != nil
		errs := await(t, nodes, nd, x, []*btl.RMAOp{{Peer: 1, Local: btl.HostMem(dst), Remote: &remote}}, []bool{true})
		if reaped {
			if errs[0] == nil {
				t.Fatal("a get from a dead, reaped process succeeded")
			}
			t.Logf("get %d after the kill failed as it should: %v", i, errs[0])
			if errors.Is(errs[0], btl.ErrRMARefused) {
				t.Log("(refused)")
			}
			return
		}
		if time.Since(start) > 100*time.Millisecond && c.cmd.ProcessState == nil {
			c.cmd.Wait() // reap it: the next get is from a dead process
		}
		if time.Since(start) > deathTimeout {
			t.Fatalf("the child did not die in %v", deathTimeout)
		}
	}
}
