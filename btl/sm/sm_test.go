package sm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/btl/btltest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envCopyChild) != "" {
		os.Exit(copyChild())
	}
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) { btltest.Run(t, btltest.Transport{Name: "sm"}) }

// TestConformanceSmallRing runs the suite again on a ring of 2 slots of
// 4 KiB, so that every case wraps the ring many times and fragments most
// frames (gloo's test-only segment-size knob).
func TestConformanceSmallRing(t *testing.T) {
	t.Setenv("GORUN_SM_SLOTS", "2")
	t.Setenv("GORUN_SM_FRAG_SIZE", "4096")
	t.Setenv("GORUN_SM_EAGER_LIMIT", "1024")
	btltest.Run(t, btltest.Transport{Name: "sm"})
}

// TestConformanceLeastRing runs the suite on the least ring a short
// /dev/shm gets (fitSteps: 2 slots of 1 KiB) with the default eager
// limit, so that an eager message of 16 KiB streams through it in 16
// records.
func TestConformanceLeastRing(t *testing.T) {
	t.Setenv("GORUN_SM_SLOTS", "2")
	t.Setenv("GORUN_SM_FRAG_SIZE", "1024")
	btltest.Run(t, btltest.Transport{Name: "sm"})
}

func BenchmarkSM(b *testing.B) { btltest.Bench(b, btltest.Transport{Name: "sm"}) }

// TestLayout checks that every shared atomic word is aligned to its size
// and inside one cache line (a straddling atomic takes a bus lock: ~0.5
// ms here), and that the words different sides write are on different
// lines.
func TestLayout(t *testing.T) {
	words := []struct {
		name      string
		off, size int
	}{
		{"magic", offMagic, 8}, {"closed", offClosed, 4}, {"waiters", offWaiters, 4},
		{"seq", offSeq, 4}, {"nreg", offNReg, 4}, {"opened", offOpened, 4}, {"list[0]", offList, 4},
		{"head", offHead, 8}, {"prodpid", offProdPID, 4}, {"full", offFull, 4}, {"prodclosed", offProdClosed, 4},
		{"record seq", offRecSeq, 8}, {"bellon", offBellOn, 4},
		{"bell[0] np=2", offBell(2), 8}, {"bell[1] np=100", offBell(100) + 8, 8},
	}
	for _, w := range words {
		if w.off%w.size != 0 || w.off/lineSize != (w.off+w.size-1)/lineSize {
			t.Errorf("%s at %d (%d bytes) is misaligned or straddles a line", w.name, w.off, w.size)
		}
	}
	line := func(off int) int { return off / lineSize }
	// Owner-written, sender-written and consumer-written words apart.
	if line(offWaiters) == line(offSeq) || line(offSeq) == line(offNReg) || line(offMagic) == line(offWaiters) {
		t.Error("control words written by different sides share a line")
	}
	if line(offHead) == line(offFull) {
		t.Error("consumer's head shares a line with the producer's words")
	}
	for _, g := range [][2]int{{16, 64 << 10}, {2, 4096}, {4, 64}, {8, 192}} {
		r := newRing(make([]byte, ringBytes(g[0], g[1])), g[0], g[1])
		if r.cap%slotAlign != 0 || r.rec%slotAlign != 0 || r.cap < 2*r.rec || fragCap(r.rec) < g[1] {
			t.Errorf("%d slots of %d: ring of %d bytes, records up to %d carrying %d", g[0], g[1], r.cap, r.rec, fragCap(r.rec))
		}
		if o := uintptr(unsafe.Pointer(&r.data[0])) - uintptr(unsafe.Pointer(&r.mem[0])); o%uintptr(pageSize) != 0 {
			t.Errorf("%d slots of %d: data area at ring offset %d, not on a page", g[0], g[1], o)
		}
	}
	// A small eager frame (p2p's header has 14 significant bytes up to
	// 64 KiB) with 32 payload bytes is one line.
	if recLen(14+32) > lineSize {
		t.Error("a 32-byte eager frame is not a one-line record")
	}
	for _, n := range []int{1, 2, 64, 65, 1000} {
		if offBell(n) < offList+4*n || offBell(n)%lineSize != 0 || ctlBytes(n) < offBell(n)+8*bellWords(n) {
			t.Errorf("np=%d: doorbell at %d overlaps the registry or the rings", n, offBell(n))
		}
	}
	if line(offBell(2)) == line(offNReg) || line(offBell(2)) == line(offSeq) {
		t.Error("the doorbell shares a line with another control word")
	}
	if ringBytes(16, 64<<10)%pageSize != 0 || ctlBytes(3)%pageSize != 0 {
		t.Error("ring or control area not a page multiple (mmap offsets)")
	}
}

func TestSignificant(t *testing.T) {
	for _, c := range []struct {
		set  []int // bytes set to 1
		want int
	}{{nil, 0}, {[]int{0}, 1}, {[]int{7}, 8}, {[]int{8}, 9}, {[]int{3, 31}, 32}, {[]int{40}, 41}, {[]int{47}, 48}, {[]int{0, 47}, 48}} {
		var h btl.Header
		for _, i := range c.set {
			h[i] = 1
		}
		if got := significant(&h); got != c.want {
			t.Errorf("bytes %v set: significant %d, want %d", c.set, got, c.want)
		}
	}
}

// handler is a minimal btl.Handler for the tests below.
type handler struct {
	frames [][]byte
	failed []error
}

func (h *handler) Begin(src int, hd *btl.Header, n int) []byte { return make([]byte, n) }
func (h *handler) End(src int, hd *btl.Header, d []byte)       { h.frames = append(h.frames, d) }
func (h *handler) PeerFailed(src int, err error)               { h.failed = append(h.failed, err) }

type doneCount struct{ n, errs int }

func (d *doneCount) FrameDone(f *btl.Frame, err error) {
	d.n++
	if err != nil {
		d.errs++
	}
}

var jobN atomic.Int32

// pair opens ranks 0 and 1 of a fresh job in this process.
func pair(t testing.TB) (job string, m [2]*module, h [2]*handler) {
	t.Helper()
	job = fmt.Sprintf("smtest%d-%d", os.Getpid(), jobN.Add(1))
	for r := range m {
		h[r] = &handler{}
		mod, err := component{}.Open(btl.Env{Rank: r, Size: 2, JobID: job, HostID: "h", Handler: h[r]})
		if err != nil {
			t.Fatal(err)
		}
		m[r] = mod.(*module)
	}
	t.Cleanup(func() {
		m[0].Close()
		m[1].Close()
		left, _ := filepath.Glob("/dev/shm/gorun-" + job + "-*")
		if len(left) > 0 {
			t.Errorf("left in /dev/shm: %v", left)
		}
		for _, f := range left {
			os.Remove(f)
		}
	})
	return job, m, h
}

func peerDesc(m *module) btl.Peer {
	return btl.Peer{Rank: m.env.Rank, HostID: m.env.HostID, PID: os.Getpid(), Addrs: map[string][]byte{"sm": m.Address()}}
}

func reach(t testing.TB, from, to *module) btl.Endpoint {
	t.Helper()
	ep, err := from.Reach(peerDesc(to))
	if err != nil || ep == nil {
		t.Fatalf("rank %d: reach rank %d: %v %v", from.env.Rank, to.env.Rank, ep, err)
	}
	return ep
}

// TestWakeProtocol checks the waiting words: a sender bumps the futex
// word only while the receiver counts itself as a waiter, and a consumer
// that frees a full ring wakes its producer.
func TestWakeProtocol(t *testing.T) {
	// A ring of 256 bytes: three one-line records and the terminator's
	// line fill it (frames of 25 bytes: too long for a short record).
	t.Setenv("GORUN_SM_SLOTS", "2")
	t.Setenv("GORUN_SM_FRAG_SIZE", "64")
	_, m, h := pair(t)
	ep := reach(t, m[0], m[1])
	seq := u32(m[1].own.ctl, offSeq)
	d := &doneCount{}
	pay := func(c string) []byte { return []byte(strings.Repeat(c, shortBody+1)) }

	ep.Send(&btl.Frame{Payload: pay("a"), Owner: d})
	if atomic.LoadUint32(seq) != 0 {
		t.Fatal("sender bumped the futex word with nobody waiting")
	}
	atomic.AddUint32(u32(m[1].own.ctl, offWaiters), 1)
	ep.Send(&btl.Frame{Payload: pay("b"), Owner: d})
	atomic.AddUint32(u32(m[1].own.ctl, offWaiters), ^uint32(0))
	if atomic.LoadUint32(seq) != 1 {
		t.Fatalf("futex word %d after a send to a waiting receiver, want 1", atomic.LoadUint32(seq))
	}
	// The ring is full after a third: the next frame queues and raises
	// the producer's flag; rank 1 consuming while rank 0 "sleeps" bumps
	// rank 0's word.
	ep.Send(&btl.Frame{Payload: pay("c"), Owner: d})
	ep.Send(&btl.Frame{Payload: pay("d"), Owner: d})
	if d.n != 3 {
		t.Fatalf("%d frames done, want 3 (fourth queued)", d.n)
	}
	if atomic.LoadUint32(m[0].peers[1].out.fullp) != 1 || m[0].ready() {
		t.Fatal("full ring: the producer's flag is not raised, or Wait would not sleep")
	}
	atomic.AddUint32(u32(m[0].own.ctl, offWaiters), 1)
	m[1].Progress()
	atomic.AddUint32(u32(m[0].own.ctl, offWaiters), ^uint32(0))
	if atomic.LoadUint32(u32(m[0].own.ctl, offSeq)) != 1 {
		t.Fatal("consumer freed a full ring without waking its producer")
	}
	if !m[0].ready() {
		t.Fatal("producer with room and a queued frame is not ready")
	}
	m[0].Progress()
	m[1].Progress()
	if d.n != 4 || len(h[1].frames) != 4 || string(h[1].frames[3]) != string(pay("d")) {
		t.Fatalf("done %d, received %q", d.n, h[1].frames)
	}
	// Nothing to do: Wait sleeps about its timeout, then returns.
	t0 := time.Now()
	m[1].Wait(2 * time.Millisecond)
	if el := time.Since(t0); el < time.Millisecond {
		t.Errorf("Wait(2ms) with nothing pending returned after %v", el)
	}
}

// TestRingStream streams frames of many sizes through one ring, with the
// consumer keeping up and then with a backlog that wraps the whole ring:
// every frame arrives intact and in order, and after every push the half
// lines the producer claims to have zeroed ahead of its tail (advance)
// start with a 0 word.
func TestRingStream(t *testing.T) {
	_, m, h := pair(t)
	ep := reach(t, m[0], m[1])
	o := m[0].peers[1].out
	d := &doneCount{}
	// Five short records in every ten frames (0-21 bytes: the header is
	// all zero), so that full records come after an odd number of them
	// too, and pads.
	sent, size := 0, func(k int) int { return []int{0, 1, 8, 16, 17, 30, 100, 1000, 5000, 70000}[k%10] + k%5 }
	send := func() {
		p := make([]byte, size(sent))
		for i := range p {
			p[i] = byte(sent + i)
		}
		ep.Send(&btl.Frame{Payload: p, Owner: d})
		sent++
		for pos, off := o.tail, o.toff; pos < o.zeroed; pos += halfLine {
			if w := *u64(o.data, off); w != 0 {
				t.Fatalf("frame %d: word %#x at stream position %d, below the zeroed mark %d", sent, w, pos, o.zeroed)
			}
			if off += halfLine; off == o.cap {
				off = 0
			}
		}
	}
	for range 200 {
		send()
		m[1].Progress()
		for len(o.queue) > 0 {
			m[0].Progress()
			m[1].Progress()
		}
	}
	for range 400 { // a backlog: the consumer polls only when the ring is full
		send()
		for len(o.queue) > 0 {
			m[1].Progress()
			m[0].Progress()
		}
	}
	for m[1].Progress() > 0 {
	}
	if d.n != sent || d.errs != 0 || len(h[1].frames) != sent {
		t.Fatalf("%d sent, %d done (%d errors), %d received", sent, d.n, d.errs, len(h[1].frames))
	}
	for k, f := range h[1].frames {
		if len(f) != size(k) || (len(f) > 0 && (f[0] != byte(k) || f[len(f)-1] != byte(k+len(f)-1))) {
			t.Fatalf("frame %d: %d bytes, damaged or out of order", k, len(f))
		}
	}
}

// TestShortPad: a short record takes half a line, and a full record after
// an odd number of them starts on the next line, behind a pad, by either
// way of sending; every frame arrives.
func TestShortPad(t *testing.T) {
	_, m, h := pair(t)
	ep := reach(t, m[0], m[1])
	imm := ep.(btl.Immediate)
	o := m[0].peers[1].out
	d := &doneCount{}
	short, line := []byte("short"), bytes.Repeat([]byte{7}, 30)
	steps := []struct {
		now  bool
		p    []byte
		toff int // the tail's offset after it
	}{
		{true, short, 32}, {true, line, 128}, {false, short, 160}, {false, line, 256},
		{true, short, 288}, {false, short, 320}, {true, line, 384},
	}
	for i, s := range steps {
		if s.now {
			if !imm.SendNow(&btl.Header{}, s.p) {
				t.Fatalf("step %d: SendNow refused a frame on an empty ring", i)
			}
		} else {
			ep.Send(&btl.Frame{Payload: s.p, Owner: d})
		}
		if o.toff != s.toff {
			t.Fatalf("step %d: tail at offset %d, want %d", i, o.toff, s.toff)
		}
	}
	for m[1].Progress() > 0 {
	}
	if len(h[1].frames) != len(steps) {
		t.Fatalf("%d frames received of %d", len(h[1].frames), len(steps))
	}
	for i, s := range steps {
		if !bytes.Equal(h[1].frames[i], s.p) {
			t.Fatalf("frame %d: %q, want %q", i, h[1].frames[i], s.p)
		}
	}
}

// TestUnlinkEarly: with the placement known (btl.Env.LocalSize), a
// segment's name goes as soon as every local peer has opened it,
// and traffic goes on.
func TestUnlinkEarly(t *testing.T) {
	job := fmt.Sprintf("smtest%d-%d", os.Getpid(), jobN.Add(1))
	var m [2]*module
	var h [2]*handler
	for r := range m {
		h[r] = &handler{}
		env := btl.Env{Rank: r, Size: 2, JobID: job, HostID: "h", Handler: h[r]}
		env.LocalRank, env.LocalSize = r, 2
		mod, err := component{}.Open(env)
		if err != nil {
			t.Fatal(err)
		}
		m[r] = mod.(*module)
		defer mod.Close()
	}
	ep := reach(t, m[0], m[1]) // rank 0 opens rank 1's segment
	d := &doneCount{}
	ep.Send(&btl.Frame{Payload: []byte("x"), Owner: d})
	m[1].Progress() // rank 1 adopts rank 0 and opens its segment
	m[0].Progress()
	for r := range m {
		if _, err := os.Stat(segName(job, r)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("rank %d's segment still named after every local peer opened it: %v", r, err)
		}
	}
	// The reverse direction maps its ring through the descriptor kept open.
	ep1 := reach(t, m[1], m[0])
	ep1.Send(&btl.Frame{Payload: []byte("y"), Owner: d})
	m[0].Progress()
	if len(h[0].frames) != 1 || len(h[1].frames) != 1 || d.n != 2 || d.errs != 0 {
		t.Fatalf("after unlink: received %q / %q, %d done, %d errors", h[0].frames, h[1].frames, d.n, d.errs)
	}

	// Alone on its host, a rank does not open sm at all.
	alone := btl.Env{Rank: 0, Size: 2, JobID: job, HostID: "h", Handler: h[0]}
	alone.LocalSize = 1
	if _, err := (component{}).Open(alone); err == nil {
		t.Error("sm opened for a rank alone on its host")
	}
}

// TestReachRefusals: other hosts, missing or foreign segments and forged
// addresses are not reached through sm.
func TestReachRefusals(t *testing.T) {
	_, m, _ := pair(t)
	p := peerDesc(m[1])
	p.HostID = "elsewhere"
	if ep, err := m[0].Reach(p); ep != nil || err != nil {
		t.Errorf("reached another host: %v %v", ep, err)
	}
	p = peerDesc(m[1])
	p.PID = os.Getpid() + 1
	if ep, err := m[0].Reach(p); ep != nil || err != nil {
		t.Errorf("reached a segment whose owner is not the peer's pid: %v %v", ep, err)
	}
	p = peerDesc(m[1])
	p.Addrs = map[string][]byte{"sm": []byte("/etc/passwd")}
	if ep, err := m[0].Reach(p); ep != nil || err == nil {
		t.Errorf("forged address accepted: %v %v", ep, err)
	}
	p = peerDesc(m[0])
	if ep, err := m[0].Reach(p); ep != nil || err != nil {
		t.Errorf("sm reached its own rank: %v %v", ep, err)
	}
	// A job whose peer never opened sm (its card has no sm address).
	p = peerDesc(m[1])
	p.Addrs = nil
	if ep, err := m[0].Reach(p); ep != nil || err != nil {
		t.Errorf("reached a peer without an sm address: %v %v", ep, err)
	}
}

// doneOnce records the outcome of one RMA operation.
type doneOnce struct {
	n   int
	err error
}

func (d *doneOnce) RMADone(op *btl.RMAOp, err error) { d.n++; d.err = err }

// rmaCopy runs one Get (or Put) of local against the peer's host memory
// at addr (a region of n bytes) at off, and returns its outcome. sm
// completes inside the call.
func rmaCopy(m *module, peer int, local []byte, addr uintptr, n int, off uint64, put bool) error {
	var d doneOnce
	op := btl.RMAOp{Peer: peer, Local: btl.HostMem(local), Remote: &btl.Region{Kind: btl.MemHost, Addr: uint64(addr), Len: uint64(n)}, Offset: off, Owner: &d}
	var err error
	if put {
		err = m.Put(&op)
	} else {
		err = m.Get(&op)
	}
	if err != nil {
		return err
	}
	if d.n != 1 {
		return fmt.Errorf("RMADone called %d times", d.n)
	}
	return d.err
}

// TestSingleCopyInProcess exercises Get and Put between two modules of
// this process (process_vm_readv on oneself), and the
// GORUN_SM_SINGLE_COPY=none refusal.
func TestSingleCopyInProcess(t *testing.T) {
	_, m, _ := pair(t)
	reach(t, m[0], m[1])
	if !m[0].RMAKinds(peerDesc(m[1])).Has(btl.MemHost) {
		t.Skipf("single copy refused here: %s", m[0].noCopy)
	}
	src := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	dst := make([]byte, len(src))
	var reg btl.Region
	if err := m[1].Register(btl.HostMem(src), &reg); err != nil || reg.Addr != uint64(uintptr(unsafe.Pointer(&src[0]))) || reg.Len != uint64(len(src)) || len(reg.Key()) != 0 {
		t.Fatalf("Register: %v %+v", err, reg)
	}
	if err := rmaCopy(m[0], 1, dst, uintptr(unsafe.Pointer(&src[0])), len(src), 0, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, dst) {
		t.Fatal("Get copied wrong bytes")
	}
	clear(dst)
	if err := rmaCopy(m[0], 1, src[100:], uintptr(unsafe.Pointer(&dst[0])), len(dst), 100, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src[100:], dst[100:]) || dst[99] != 0 {
		t.Fatal("Put at an offset copied wrong bytes")
	}
	if err := rmaCopy(m[0], 1, dst[:8], 8, 8, 0, false); err == nil || errors.Is(err, btl.ErrRMARefused) {
		t.Errorf("get at a bad address: %v, want an error other than ErrRMARefused", err)
	}
	if err := rmaCopy(m[0], 1, dst[:16], uintptr(unsafe.Pointer(&src[0])), 8, 0, false); err == nil {
		t.Error("get past the end of the region succeeded")
	}
	if err := rmaCopy(m[0], 1, dst[:8], uintptr(unsafe.Pointer(&src[0])), 16, 9, false); err == nil {
		t.Error("get past the end of the region at an offset succeeded")
	}
	if m[0].RMAKinds(peerDesc(m[0])) != 0 || m[0].RMAKinds(btl.Peer{Rank: 7, HostID: "h"}) != 0 {
		t.Error("RMA offered to itself or a rank outside the job")
	}
	if err := m[0].Register(btl.DeviceMem(0, 0x1000, 8), &reg); !errors.Is(err, btl.ErrRMARefused) {
		t.Errorf("Register of device memory: %v, want ErrRMARefused", err)
	}

	t.Setenv("GORUN_SM_SINGLE_COPY", "none")
	_, m2, _ := pair(t)
	reach(t, m2[0], m2[1])
	if m2[0].RMAKinds(peerDesc(m2[1])) != 0 {
		t.Error("GORUN_SM_SINGLE_COPY=none: RMA still offered")
	}
	if err := rmaCopy(m2[0], 1, dst, uintptr(unsafe.Pointer(&src[0])), len(src), 0, false); !errors.Is(err, btl.ErrRMARefused) {
		t.Errorf("GORUN_SM_SINGLE_COPY=none: Get gave %v, want ErrRMARefused", err)
	}
}

const envCopyChild = "GORUN_SMTEST_COPY_CHILD"

// copyChild is the other process of TestSingleCopyAcrossProcesses: it
// opens rank 1, prints its segment, the address of a source buffer and of
// a destination buffer, waits for "check", and says whether the
// destination holds the source's bytes reversed.
func copyChild() int {
	job := os.Getenv(envCopyChild)
	mod, err := component{}.Open(btl.Env{Rank: 1, Size: 2, JobID: job, HostID: "h", Handler: &handler{}})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer mod.Close()
	src := []byte(strings.Repeat("cross-process single copy ", 40000))
	dst := make([]byte, len(src))
	fmt.Printf("bufs %d %d %d\n", uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&dst[0])), len(src))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() && sc.Text() != "check" {
	}
	for i := range src {
		if dst[i] != src[len(src)-1-i] {
			fmt.Println("mismatch at", i)
			return 1
		}
	}
	fmt.Println("ok")
	return 0
}

// TestSingleCopyAcrossProcesses reads a child's buffer with Get and
// writes another with Put, and the child checks it.
func TestSingleCopyAcrossProcesses(t *testing.T) {
	job := fmt.Sprintf("smtest%d-%d", os.Getpid(), jobN.Add(1))
	defer func() {
		left, _ := filepath.Glob("/dev/shm/gorun-" + job + "-*")
		for _, f := range left {
			os.Remove(f)
		}
	}()
	mod, err := component{}.Open(btl.Env{Rank: 0, Size: 2, JobID: job, HostID: "h", Handler: &handler{}})
	if err != nil {
		t.Fatal(err)
	}
	m := mod.(*module)
	defer m.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCopyChild+"="+job)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(outp)
	if !sc.Scan() {
		t.Fatalf("child said nothing: %s", stderr.String())
	}
	f := strings.Fields(sc.Text())
	if len(f) != 4 || f[0] != "bufs" {
		t.Fatalf("child: %q %s", sc.Text(), stderr.String())
	}
	srcAddr, _ := strconv.ParseUint(f[1], 10, 64)
	dstAddr, _ := strconv.ParseUint(f[2], 10, 64)
	n, _ := strconv.Atoi(f[3])

	if _, err := m.Reach(btl.Peer{Rank: 1, HostID: "h", PID: cmd.Process.Pid, Addrs: map[string][]byte{"sm": []byte(segName(job, 1))}}); err != nil {
		t.Fatal(err)
	}
	if !m.RMAKinds(btl.Peer{Rank: 1, HostID: "h"}).Has(btl.MemHost) {
		t.Skipf("single copy refused here: %s", m.noCopy)
	}
	buf := make([]byte, n)
	if err := rmaCopy(m, 1, buf, uintptr(srcAddr), n, 0, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, []byte(strings.Repeat("cross-process single copy ", 40000))) {
		t.Fatal("Get from the child copied wrong bytes")
	}
	for i, j := 0, len(buf)-1; i < j; i, j = i+1, j-1 {
		buf[i], buf[j] = buf[j], buf[i]
	}
	if err := rmaCopy(m, 1, buf, uintptr(dstAddr), n, 0, true); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, "check")
	if !sc.Scan() || sc.Text() != "ok" {
		t.Fatalf("child after Put: %q %s", sc.Text(), stderr.String())
	}
}

// TestConformanceDoorbell runs the suite with the receivers in doorbell
// mode from the start, on the small ring (budget cut-offs and fragmented
// frames keep rings hot across polls).
func TestConformanceDoorbell(t *testing.T) {
	t.Setenv("GORUN_SM_DOORBELL_AFTER", "0")
	t.Setenv("GORUN_SM_SLOTS", "2")
	t.Setenv("GORUN_SM_FRAG_SIZE", "4096")
	t.Setenv("GORUN_SM_EAGER_LIMIT", "1024")
	btltest.Run(t, btltest.Transport{Name: "sm"})
}

// srcHandler records frames by source.
type srcHandler struct {
	got    map[int][]string
	failed []error
}

func (h *srcHandler) Begin(src int, hd *btl.Header, n int) []byte { return make([]byte, n) }
func (h *srcHandler) End(src int, hd *btl.Header, d []byte) {
	h.got[src] = append(h.got[src], string(d))
}
func (h *srcHandler) PeerFailed(src int, err error) { h.failed = append(h.failed, err) }

// TestDoorbell has 69 senders (two doorbell words) in this process send
// to rank 0: below the threshold rank 0 polls every ring, past it it
// switches to the doorbell (senders that published before they saw the
// switch included); rung bits are cleared by Progress, the hot list
// empties once the rings are drained, Wait's ready sees a ring's bit, and
// a frame fragmented over several polls completes.
func TestDoorbell(t *testing.T) {
	const n, after = 70, 3
	t.Setenv("GORUN_SM_SLOTS", "2")
	t.Setenv("GORUN_SM_FRAG_SIZE", "4096")
	t.Setenv("GORUN_SM_DOORBELL_AFTER", strconv.Itoa(after))
	job := fmt.Sprintf("smtest%d-%d", os.Getpid(), jobN.Add(1))
	m := make([]*module, n)
	h := &srcHandler{got: map[int][]string{}}
	for r := range m {
		var hh btl.Handler = &handler{}
		if r == 0 {
			hh = h
		}
		mod, err := component{}.Open(btl.Env{Rank: r, Size: n, JobID: job, HostID: "h", Handler: hh})
		if err != nil {
			t.Fatal(err)
		}
		m[r] = mod.(*module)
	}
	t.Cleanup(func() {
		for _, x := range m {
			x.Close()
		}
		left, _ := filepath.Glob("/dev/shm/gorun-" + job + "-*")
		for _, f := range left {
			os.Remove(f)
		}
	})
	d := &doneCount{}
	ep := make([]btl.Endpoint, n)
	send := func(r int, s string) {
		if err := ep[r].Send(&btl.Frame{Payload: []byte(s), Owner: d}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int][]string{}
	check := func(when string) {
		t.Helper()
		for r := 1; r < n; r++ {
			if fmt.Sprint(h.got[r]) != fmt.Sprint(want[r]) {
				t.Fatalf("%s: from rank %d got %q, want %q", when, r, h.got[r], want[r])
			}
		}
		if len(h.failed) > 0 {
			t.Fatalf("%s: failures %v", when, h.failed)
		}
	}
	bellWord := func(w int) uint64 { return atomic.LoadUint64(m[0].bells[w]) }

	// Below the threshold: no doorbell.
	for r := 1; r <= after; r++ {
		ep[r] = reach(t, m[r], m[0])
		send(r, fmt.Sprint("a", r))
		want[r] = append(want[r], fmt.Sprint("a", r))
	}
	m[0].Progress()
	check("polling every ring")
	if m[0].bellOn || bellWord(0) != 0 {
		t.Fatalf("doorbell on with %d senders, or rung (%#x)", after, bellWord(0))
	}
	// The rest register and everybody sends before rank 0 looks: nobody
	// rang (the flag is off), the switch must poll every ring once.
	for r := after + 1; r < n; r++ {
		ep[r] = reach(t, m[r], m[0])
	}
	for r := 1; r < n; r++ {
		send(r, fmt.Sprint("b", r))
		want[r] = append(want[r], fmt.Sprint("b", r))
	}
	if bellWord(0) != 0 || bellWord(1) != 0 {
		t.Fatal("a sender rang before the doorbell was on")
	}
	m[0].Progress()
	check("switch")
	if !m[0].bellOn || atomic.LoadUint32(u32(m[0].own.ctl, offBellOn)) != 1 {
		t.Fatal("doorbell off with 69 senders")
	}
	if m[0].Progress(); len(m[0].hot) != 0 || m[0].ready() {
		t.Fatalf("drained: %d rings still hot, ready %v", len(m[0].hot), m[0].ready())
	}
	// Two rung bits, one in each word; ready sees them; Progress clears
	// them and polls only those rings.
	send(5, "c5")
	send(66, "c66")
	send(66, "d66")
	want[5] = append(want[5], "c5")
	want[66] = append(want[66], "c66", "d66")
	if bellWord(0) != 1<<5 || bellWord(1) != 1<<(66-64) {
		t.Fatalf("doorbell %#x %#x, want bits 5 and 66", bellWord(0), bellWord(1))
	}
	if !m[0].ready() {
		t.Fatal("rung doorbell: Wait would sleep")
	}
	m[0].Progress()
	check("rung")
	if bellWord(0) != 0 || bellWord(1) != 0 || len(m[0].hot) != 0 {
		t.Fatalf("after Progress: doorbell %#x %#x, %d hot", bellWord(0), bellWord(1), len(m[0].hot))
	}
	// A frame of 5 fragments through a 2-slot ring: the ring stays hot
	// while half received, the sender rings for each batch.
	big := strings.Repeat("x", 4*4096+100)
	send(40, big)
	want[40] = append(want[40], big)
	for i := 0; i < 20 && len(h.got[40]) < len(want[40]); i++ {
		m[0].Progress()
		m[40].Progress()
	}
	check("fragmented")
	if m[0].Progress(); len(m[0].hot) != 0 || m[0].ready() {
		t.Fatalf("after the big frame: %d hot, ready %v", len(m[0].hot), m[0].ready())
	}
	// Many frames from every sender at once, more than a ring holds.
	for k := 0; k < 5; k++ {
		for r := 1; r < n; r++ {
			send(r, fmt.Sprint("e", k, r))
			want[r] = append(want[r], fmt.Sprint("e", k, r))
		}
	}
	for i := 0; i < 50; i++ {
		for _, x := range m {
			x.Progress()
		}
	}
	check("all at once")
	if d.errs != 0 {
		t.Fatalf("%d frames failed", d.errs)
	}
}

// hdrHandler keeps each frame's header and payload.
type hdrHandler struct {
	hdrs   []btl.Header
	frames [][]byte
}

func (h *hdrHandler) Begin(src int, hd *btl.Header, n int) []byte { return make([]byte, n) }
func (h *hdrHandler) End(src int, hd *btl.Header, d []byte) {
	h.hdrs = append(h.hdrs, *hd)
	h.frames = append(h.frames, d)
}
func (h *hdrHandler) PeerFailed(src int, err error) {}

// TestSendNow mixes immediate sends (btl.Immediate) with queued ones on a
// small ring that wraps many times: SendNow takes a frame only when nothing
// is queued ahead of it, the frame fits one record and the ring has room
// before its end, and, taken or refused (then sent with Send, as p2p
// does), every frame arrives whole, header included, in order.
func TestSendNow(t *testing.T) {
	t.Setenv("GORUN_SM_SLOTS", "4")
	t.Setenv("GORUN_SM_FRAG_SIZE", "256")
	_, m, _ := pair(t)
	hh := &hdrHandler{}
	m[1].env.Handler = hh
	ep := reach(t, m[0], m[1])
	imm, ok := ep.(btl.Immediate)
	if !ok {
		t.Fatal("the sm endpoint has no immediate send")
	}
	o := m[0].peers[1].out
	if imm.SendNow(&btl.Header{1}, make([]byte, o.rec)) {
		t.Fatal("SendNow took a frame larger than a record")
	}
	d := &doneCount{}
	hdrOf := func(k int) *btl.Header {
		var h btl.Header
		h[0], h[1], h[2+k%20] = byte(k), byte(k>>8), 0xee
		return &h
	}
	payOf := func(k int) []byte {
		p := make([]byte, []int{0, 1, 8, 40, 100, 180, 400}[k%7])
		for i := range p {
			p[i] = byte(k + i)
		}
		return p
	}
	var now, refused, queuedAhead int
	const n = 3000
	for k := range n {
		h, p := hdrOf(k), payOf(k)
		if k%5 == 4 {
			ep.Send(&btl.Frame{Hdr: *h, Payload: p, Owner: d})
		} else {
			q := len(o.queue) > 0
			if imm.SendNow(h, p) {
				if q {
					t.Fatalf("frame %d: SendNow went ahead of %d queued frames", k, len(o.queue))
				}
				now++
			} else {
				refused++
				if q {
					queuedAhead++
				}
				ep.Send(&btl.Frame{Hdr: *h, Payload: p, Owner: d})
			}
		}
		// The consumer keeps up in some stretches and falls behind in
		// others, so that the ring fills and frames queue.
		if (k/200)%2 == 0 || k%11 == 0 {
			m[1].Progress()
			m[0].Progress()
		}
	}
	for len(o.queue) > 0 || m[1].Progress() > 0 {
		m[0].Progress()
	}
	if now == 0 || refused == 0 || queuedAhead == 0 {
		t.Fatalf("%d taken, %d refused (%d behind a queue): the test did not reach every case", now, refused, queuedAhead)
	}
	if len(hh.frames) != n || d.errs != 0 {
		t.Fatalf("%d frames received of %d (%d errors)", len(hh.frames), n, d.errs)
	}
	for k := range n {
		if hh.hdrs[k] != *hdrOf(k) || !bytes.Equal(hh.frames[k], payOf(k)) {
			t.Fatalf("frame %d: header or payload damaged, or out of order", k)
		}
	}
	t.Logf("%d frames taken at once, %d refused (%d behind a queue)", now, refused, queuedAhead)
}

// TestFitRing: the ring shape shrinks fragment first down to the eager
// limit, then slots down to 4, fragment down to 4 KiB, slots down to 2,
// fragment down to 1 KiB, and stops there; a budget it fits is left
// alone.
func TestFitRing(t *testing.T) {
	if pageSize != 4096 {
		t.Skipf("the shapes below are for 4 KiB pages, not %d", pageSize)
	}
	def := ringBytes(defaultSlots, defaultFrag)
	for _, c := range []struct{ budget, slots, frag int }{
		{1 << 40, 16, 64 << 10},
		{def, 16, 64 << 10},
		{def - 1, 16, 32 << 10},
		{300 << 10, 16, 16 << 10},
		{140 << 10, 8, 16 << 10},
		{72 << 10, 4, 16 << 10},
		{40 << 10, 4, 8 << 10},
		{24 << 10, 4, 4 << 10},
		{20 << 10, 2, 4 << 10},
		{12 << 10, 2, 2 << 10},
		{8 << 10, 2, 1 << 10},
		{0, 2, 1 << 10},
	} {
		s, f := fitRing(defaultSlots, defaultFrag, c.budget)
		if s != c.slots || f != c.frag {
			t.Errorf("budget %d: %d slots of %d, want %d of %d", c.budget, s, f, c.slots, c.frag)
		}
		if c.budget >= 8<<10 && ringBytes(s, f) > c.budget {
			t.Errorf("budget %d: ring of %d bytes", c.budget, ringBytes(s, f))
		}
	}
	// With 64 KiB pages a ring is at least a page: the shrinking stops
	// where it would save nothing.
	defer func(p int) { pageSize = p }(pageSize)
	pageSize = 64 << 10
	if s, f := fitRing(defaultSlots, defaultFrag, 0); ringBytes(s, f) != 64<<10 || s != 4 || f != 8<<10 {
		t.Errorf("64 KiB pages, budget 0: %d slots of %d (%d bytes), want 4 of 8 KiB in one page", s, f, ringBytes(s, f))
	}
}
