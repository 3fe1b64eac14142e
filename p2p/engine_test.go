package p2p

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gorun/gorun/btl"
	_ "github.com/gorun/gorun/btl/self"
	_ "github.com/gorun/gorun/btl/sm"
	_ "github.com/gorun/gorun/btl/tcp"
	"golang.org/x/sys/unix"
)

// The engine's tests run on real transports, in this process: btl/self
// (one rank, RMA rendezvous by Get/Put on itself), and every other
// registered transport as ranks 0 and 1 of one job, each with its own
// engine and module (btl/sm: RMA by process_vm_readv/writev on this very
// process; btl/tcp over loopback: rendezvous by frames). Each rank's calls
// run in a goroutine of their own and drive their engine's progress
// through Wait, as an MPI program's would.

// testTimeout bounds every group of goroutines a test runs (within).
const testTimeout = 20 * time.Second

// hostID is the host every rank of a test world believes it is on.
const hostID = "p2ptest-host"

// setup is one transport configuration the tests run over.
type setup struct {
	name string
	btl  string            // the transport opened, by its registered name
	env  map[string]string // set with t.Setenv before opening
	// bare: the modules deliver to the engine's own handler, without the
	// spy's log (benchmarks: the log allocates per frame).
	bare bool
	// extra, if set, makes a module of rank r's engine e to attach after
	// the opened ones (a fake GPU transport: stagebound_test.go).
	extra func(r int, e *Engine) btl.Module
}

// setups lists every registered transport, plus btl/sm with single copy
// turned off: its rendezvous then goes by frames through the ring.
func setups() []setup {
	var s []setup
	for _, n := range btl.Names() {
		s = append(s, setup{name: n, btl: n})
		if n == "sm" {
			s = append(s, setup{name: "sm-nocopy", btl: n, env: map[string]string{"GORUN_SM_SINGLE_COPY": "none"}})
		}
	}
	return s
}

// world is a job in this process: one engine (self) or two.
type world struct {
	setup
	engs  []*Engine
	spies []*spy
	eager int // the transport's eager limit
}

// spy is the btl.Handler the modules of a test world deliver to: the
// engine's own, which it calls, and a log of the headers of the frames
// that arrived, so that a test can tell which protocol ran.
type spy struct {
	btl.Handler
	mu  sync.Mutex
	log []header
}

func (s *spy) End(src int, h *btl.Header, data []byte) {
	var d header
	d.decode(h)
	s.mu.Lock()
	s.log = append(s.log, d)
	s.mu.Unlock()
	s.Handler.End(src, h, data)
}

// frames returns and forgets the headers of the frames that arrived at
// rank.
func (w *world) frames(rank int) []header {
	s := w.spies[rank]
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.log
	s.log = nil
	return l
}

// count is how many of the headers are of kind k and have every flag in
// flags set.
func count(hs []header, k kind, flags uint8) int {
	n := 0
	for _, h := range hs {
		if h.kind == k && h.flags&flags == flags {
			n++
		}
	}
	return n
}

// src and dst are the ranks a test sends from and to (both 0 on self).
func (w *world) src() int          { return 0 }
func (w *world) dst() int          { return len(w.engs) - 1 }
func (w *world) sender() *Engine   { return w.engs[w.src()] }
func (w *world) receiver() *Engine { return w.engs[w.dst()] }
func (w *world) rendezvous() []int {
	return []int{w.eager + 1, splitMin - 1, splitMin, splitMin + 1, 1<<20 + 7, 3<<20 + 5}
}

// rma says whether a rendezvous of host memory should go by RMA in w, if
// known: always on self; on sm when this kernel lets a process
// process_vm_readv itself (containers may forbid it), unless single copy
// is off; never on tcp.
func (w *world) rma() (want, known bool) {
	switch w.name {
	case "self":
		return true, true
	case "sm":
		var probe [8]byte
		src := []byte("p2ptest!")
		_, err := unix.ProcessVMReadv(os.Getpid(),
			[]unix.Iovec{{Base: &probe[0], Len: 8}},
			[]unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: 8}}, 0)
		return err == nil, true
	case "sm-nocopy", "tcp":
		return false, true
	}
	return false, false
}

var jobSeq atomic.Int64

// openWorld opens the engines of s, attached to each other the way
// mpi.Init does: through btl.OpenAll with the setup's filter. Cleanup
// closes them and removes what the job left in /dev/shm.
func openWorld(t testing.TB, s setup) *world {
	t.Helper()
	for k, v := range s.env {
		t.Setenv(k, v)
	}
	size := 2
	if s.btl == "self" {
		size = 1
	}
	f, err := btl.ParseFilter(s.btl)
	if err != nil {
		t.Fatal(err)
	}
	job := fmt.Sprintf("p2ptest%d-%d", os.Getpid(), jobSeq.Add(1))
	secret := make([]byte, 32)
	rand.Read(secret)
	w := &world{setup: s}
	mods := make([][]btl.Module, size)
	t.Cleanup(func() {
		for _, e := range w.engs {
			e.Close()
		}
		left, _ := filepath.Glob("/dev/shm/gorun-" + job + "-*")
		for _, p := range left {
			os.Remove(p)
		}
	})
	for r := range size {
		e := Alloc(r, size)
		sp := &spy{Handler: Handler(e)}
		var h btl.Handler = sp
		if s.bare {
			h = Handler(e)
		}
		ms, skipped, err := btl.OpenAll(btl.Env{Rank: r, Size: size, JobID: job, HostID: hostID, Secret: secret, Handler: h}, f)
		if err != nil {
			t.Fatalf("rank %d: open %s: %v (%v)", r, s.btl, err, skipped)
		}
		if s.extra != nil {
			ms = append(ms, s.extra(r, e))
		}
		w.engs = append(w.engs, e)
		w.spies = append(w.spies, sp)
		mods[r] = ms
	}
	peers := make([]btl.Peer, size)
	for r := range peers {
		peers[r] = btl.Peer{Rank: r, HostID: hostID, PID: os.Getpid(), Addrs: map[string][]byte{s.btl: mods[r][0].Address()}}
	}
	for r, e := range w.engs {
		if err := e.Attach(mods[r], peers); err != nil {
			t.Fatal(err)
		}
	}
	w.eager = mods[0][0].Caps().EagerLimit
	return w
}

// eachWorld runs f as a subtest on a fresh world of every setup.
func eachWorld(t *testing.T, f func(t *testing.T, w *world)) {
	for _, s := range setups() {
		t.Run(s.name, func(t *testing.T) { f(t, openWorld(t, s)) })
	}
}

// within runs every fn in a goroutine of its own and waits for all of
// them. The k-th fn is rank k's (on self, every fn is rank 0's): once it
// returns, its goroutine goes on polling that rank's engine until every
// fn has returned, as a real rank would in its next calls or in Finalize,
// since a rank's frames move only while it polls (btl/doc.go). Past
// testTimeout the test fails with every goroutine's stack, after closing
// the engines, which ends the stuck calls with ErrClosed. The fns report
// with t.Errorf (never t.Fatal, which belongs to the test's goroutine).
func (w *world) within(t *testing.T, fns ...func()) {
	t.Helper()
	var wg sync.WaitGroup
	var left atomic.Int32
	left.Store(int32(len(fns)))
	for k, f := range fns {
		e := w.engs[min(k, len(w.engs)-1)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
			left.Add(-1)
			e.until(func() bool { return left.Load() == 0 })
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		st := stacks()
		for _, e := range w.engs {
			e.Close()
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("still running after %v: a hang\n%s", testTimeout, st)
	}
	if t.Failed() {
		t.FailNow()
	}
}

func stacks() string {
	buf := make([]byte, 8<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// pattern is the content of message seed of n bytes: every byte depends
// on the seed and on its offset, low and high bits, so that a misplaced
// or stale part shows.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*151 + i + (i>>8)*31 + (i>>16)*7)
	}
	return b
}

// sameBytes describes the first difference between got and want, or "".
func sameBytes(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d of %d is %#x, want %#x", i, len(want), got[i], want[i])
		}
	}
	return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
}

// checkRecv reports a receive whose outcome is not a clean arrival of
// want from (src, tag) into buf.
func checkRecv(t *testing.T, what string, st Status, err error, buf []byte, src, tag int, want []byte) bool {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return false
	}
	if st.Source != src || st.Tag != tag || st.Bytes != len(want) {
		t.Errorf("%s: status %+v, want source %d, tag %d, %d bytes", what, st, src, tag, len(want))
		return false
	}
	if d := sameBytes(buf[:st.Bytes], want); d != "" {
		t.Errorf("%s: %s", what, d)
		return false
	}
	return true
}

// msg is one message of a test.
type msg struct {
	ctx  uint32
	tag  int
	data []byte
	sync bool
}

// sendAll starts a send of every message to dst, then waits for all.
func sendAll(t *testing.T, e *Engine, dst int, msgs []msg) {
	t.Helper()
	startAll(t, e, "send", len(msgs), func(i int) (*Request, error) {
		m := msgs[i]
		return e.Isend(m.ctx, dst, m.tag, m.data, m.sync)
	})
}

// startAll starts n operations of e (start(i) starts the i-th), then waits
// for them all and reports each one's error as what's; the first that
// fails to start ends it.
func startAll(t *testing.T, e *Engine, what string, n int, start func(i int) (*Request, error)) {
	t.Helper()
	rs := make([]*Request, n)
	for i := range n {
		r, err := start(i)
		if err != nil {
			t.Errorf("%s %d: %v", what, i, err)
			return
		}
		rs[i] = r
	}
	e.WaitAll(rs)
	for i, r := range rs {
		if _, err := r.Result(); err != nil {
			t.Errorf("%s %d: %v", what, i, err)
		}
	}
}

// TestMatching: receives match by (context, source, tag), whether posted
// before the message arrives or after (the unexpected queue), in any
// order; a receive of another context, wildcards and all, matches none of
// them.
func TestMatching(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		type key struct {
			ctx uint32
			tag int
		}
		keys := []key{{1, 5}, {2, 5}, {1, 6}, {2, 6}, {1, 7}}
		for _, mode := range []string{"posted", "unexpected"} {
			t.Run(mode, func(t *testing.T) {
				var msgs []msg
				for i, k := range keys {
					n := []int{10, w.eager + 1, 0}[i%3]
					msgs = append(msgs, msg{ctx: k.ctx, tag: k.tag, data: pattern(i, n)})
				}
				ready := make(chan struct{})
				strayBuf := make([]byte, 16)
				stray, err := w.receiver().Irecv(3, AnySource, AnyTag, strayBuf)
				if err != nil {
					t.Fatal(err)
				}
				w.within(t, func() {
					<-ready
					sendAll(t, w.sender(), w.dst(), msgs)
				}, func() {
					e := w.receiver()
					release := sync.OnceFunc(func() { close(ready) })
					defer release()
					if mode == "unexpected" {
						release()
						for _, k := range keys {
							if _, err := e.Probe(k.ctx, w.src(), k.tag); err != nil {
								t.Errorf("probe %v: %v", k, err)
								return
							}
						}
						if ok, st, _ := e.Iprobe(3, AnySource, AnyTag); ok {
							t.Errorf("context 3 probe found %+v among messages of contexts 1 and 2", st)
						}
					}
					// Post in reverse order: each still gets its own.
					rs := make([]*Request, len(keys))
					bufs := make([][]byte, len(keys))
					for i := len(keys) - 1; i >= 0; i-- {
						bufs[i] = make([]byte, w.eager+1)
						r, err := e.Irecv(keys[i].ctx, w.src(), keys[i].tag, bufs[i])
						if err != nil {
							t.Errorf("receive %v: %v", keys[i], err)
							return
						}
						rs[i] = r
					}
					release()
					for i, r := range rs {
						st, err := r.Wait()
						checkRecv(t, fmt.Sprintf("receive %v", keys[i]), st, err, bufs[i], w.src(), keys[i].tag, msgs[i].data)
					}
				})
				if stray.Done() {
					t.Fatalf("a context 3 receive matched a message of another context: %+v", stray.st)
				}
				w.within(t, func() {
					sendAll(t, w.sender(), w.dst(), []msg{{ctx: 3, tag: 9, data: []byte("three")}})
				}, func() {
					st, err := stray.Wait()
					checkRecv(t, "context 3", st, err, strayBuf, w.src(), 9, []byte("three"))
				})
			})
		}
	})
}

// TestWildcards: AnySource and AnyTag match in arrival order, and the
// status says what matched: the sender's rank, its tag, the bytes
// received. Probe's status gives the message's length.
func TestWildcards(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		msgs := []msg{
			{ctx: 1, tag: 7, data: pattern(7, 3)},
			{ctx: 1, tag: 8, data: pattern(8, w.eager+5)},
			{ctx: 1, tag: 9, data: nil},
			{ctx: 1, tag: 10, data: pattern(10, 33)},
		}
		src := w.src()
		for _, mode := range []string{"posted", "unexpected"} {
			t.Run(mode, func(t *testing.T) {
				ready := make(chan struct{})
				w.within(t, func() {
					<-ready
					sendAll(t, w.sender(), w.dst(), msgs)
				}, func() {
					e := w.receiver()
					release := sync.OnceFunc(func() { close(ready) })
					defer release()
					// Posted first: tag 8 only, then source only, then
					// both wildcards twice. In arrival order, tag 7 takes
					// the second receive, tag 8 the first, 9 and 10 the
					// last two.
					posts := []struct{ src, tag int }{{AnySource, 8}, {src, AnyTag}, {AnySource, AnyTag}, {AnySource, AnyTag}}
					want := []int{1, 0, 2, 3} // message of each receive
					if mode == "unexpected" {
						release()
						if _, err := e.Probe(1, src, 10); err != nil {
							t.Errorf("probe: %v", err)
							return
						}
						ok, st, err := e.Iprobe(1, AnySource, AnyTag)
						if !ok || err != nil || st != (Status{Source: src, Tag: 7, Bytes: 3}) {
							t.Errorf("probe with both wildcards: %v %+v %v, want the first message (tag 7, 3 bytes)", ok, st, err)
						}
						// Queued in arrival order: each wildcard receive
						// takes the oldest message it matches.
						posts = []struct{ src, tag int }{{AnySource, AnyTag}, {src, AnyTag}, {AnySource, 10}, {AnySource, AnyTag}}
						want = []int{0, 1, 3, 2}
					}
					rs := make([]*Request, len(posts))
					bufs := make([][]byte, len(posts))
					for i, p := range posts {
						bufs[i] = make([]byte, w.eager+5)
						r, err := e.Irecv(1, p.src, p.tag, bufs[i])
						if err != nil {
							t.Errorf("receive %+v: %v", p, err)
							return
						}
						rs[i] = r
					}
					release()
					for i, r := range rs {
						st, err := r.Wait()
						m := msgs[want[i]]
						checkRecv(t, fmt.Sprintf("receive %d %+v", i, posts[i]), st, err, bufs[i], src, m.tag, m.data)
					}
				})
			})
		}
	})
}

// TestOrdering: messages of one sender, context and tag are received in
// the order they were sent (MPI's non-overtaking rule), eager and
// rendezvous sizes mixed, some synchronous, whether the receives were
// posted before, after, or while the messages arrive.
func TestOrdering(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		sizes := []int{0, 1, w.eager, w.eager + 1, 100, splitMin + 3, 17, 3*w.eager + 1, 5, 2*splitMin + 1, 64, 1000}
		var msgs []msg
		for i := range 2 * len(sizes) {
			msgs = append(msgs, msg{ctx: 4, tag: 1, data: pattern(i, sizes[i%len(sizes)]), sync: i%5 == 3})
		}
		msgs = append(msgs, msg{ctx: 4, tag: 2}) // the end marker
		for _, mode := range []string{"posted", "unexpected", "interleaved"} {
			t.Run(mode, func(t *testing.T) {
				ready := make(chan struct{})
				w.within(t, func() {
					if mode != "interleaved" {
						<-ready
					}
					sendAll(t, w.sender(), w.dst(), msgs)
				}, func() {
					e := w.receiver()
					release, ok := unexpectedFirst(t, e, mode, ready, 4, w.src(), 2)
					defer release()
					if !ok {
						return
					}
					n := len(msgs) - 1
					rs := make([]*Request, n)
					bufs := make([][]byte, n)
					for i := range rs {
						bufs[i] = make([]byte, 2*splitMin+1)
						r, err := e.Irecv(4, w.src(), 1, bufs[i])
						if err != nil {
							t.Errorf("receive %d: %v", i, err)
							return
						}
						rs[i] = r
						if mode == "interleaved" {
							e.Progress()
						}
					}
					release()
					end, err := e.Irecv(4, w.src(), 2, nil)
					if err != nil {
						t.Errorf("receive the marker: %v", err)
						return
					}
					for i, r := range rs {
						st, err := r.Wait()
						checkRecv(t, fmt.Sprintf("receive %d", i), st, err, bufs[i], w.src(), 1, msgs[i].data)
					}
					if _, err := end.Wait(); err != nil {
						t.Errorf("marker: %v", err)
					}
				})
			})
		}
	})
}

// TestTruncation: a message longer than the receive buffer fills the
// buffer with its first bytes, and not one byte past it; the receive fails
// with ErrTruncate, saying both sizes, the sender and the tag, and its
// status counts the bytes received; the sender
// completes without error. Eager, and rendezvous below and above the RMA
// split (by RMA on self and sm, by frames on sm-nocopy and tcp), into
// buffers that accept below and above the split, or nothing.
func TestTruncation(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		want, known := w.rma()
		cases := []struct{ n, room int }{
			{100, 37}, {w.eager, w.eager - 1}, {w.eager + 1, 1}, {w.eager + 1, 0},
			{2*w.eager + 3, w.eager + 7}, {1<<20 + 3, splitMin + 1001}, {1<<20 + 3, 1000}, {3 * splitMin, 2*splitMin + 5},
		}
		for _, mode := range []string{"posted", "unexpected"} {
			for i, c := range cases {
				t.Run(fmt.Sprintf("%s/%d-into-%d", mode, c.n, c.room), func(t *testing.T) {
					data := pattern(i, c.n)
					const guard = 4096
					backing := bytes.Repeat([]byte{0xee}, c.room+guard)
					buf := backing[:c.room]
					ready := make(chan struct{})
					w.frames(w.src())
					defer func() {
						// A rendezvous accepting some bytes goes by RMA
						// where the transport has it.
						if rma := count(w.frames(w.src()), kCTS, fRMA) == 1; known && c.n > w.eager && rma != (want && c.room > 0) {
							t.Errorf("CTS offered RMA: %v", rma)
						}
					}()
					w.within(t, func() {
						<-ready
						sendAll(t, w.sender(), w.dst(), []msg{{ctx: 5, tag: 3, data: data}})
					}, func() {
						e := w.receiver()
						release, ok := unexpectedFirst(t, e, mode, ready, 5, w.src(), 3)
						defer release()
						if !ok {
							return
						}
						r, err := e.Irecv(5, w.src(), 3, buf)
						if err != nil {
							t.Errorf("receive: %v", err)
							return
						}
						release()
						st, err := r.Wait()
						if !errors.Is(err, ErrTruncate) {
							t.Errorf("receive: error %v, want ErrTruncate", err)
						} else if want := fmt.Sprintf("a message of %d bytes from world rank %d, tag 3, into %d bytes", c.n, w.src(), c.room); !strings.Contains(err.Error(), want) {
							t.Errorf("receive: error %q does not say %q", err, want)
						}
						if st != (Status{Source: w.src(), Tag: 3, Bytes: c.room}) {
							t.Errorf("status %+v, want source %d, tag 3, %d bytes", st, w.src(), c.room)
						}
						if d := sameBytes(buf, data[:c.room]); d != "" {
							t.Errorf("buffer: %s", d)
						}
						for j, b := range backing[c.room:] {
							if b != 0xee {
								t.Errorf("byte %d past the buffer's end overwritten", j)
								break
							}
						}
					})
				})
			}
		}
	})
}

// TestRendezvous moves messages above the eager limit, below, at and
// above the RMA split and of odd lengths. Where the transport has RMA for
// host memory (self; sm where the kernel allows process_vm_readv) the
// RTS and the CTS both offer it and FINs end the transfer; elsewhere
// (sm-nocopy, tcp) neither offers it and a DATA frame carries the bytes.
func TestRendezvous(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		want, known := w.rma()
		for i, n := range w.rendezvous() {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				data := pattern(i, n)
				buf := make([]byte, n+3)
				w.frames(w.src())
				w.frames(w.dst())
				w.within(t, func() {
					sendAll(t, w.sender(), w.dst(), []msg{{ctx: 6, tag: 4, data: data}})
				}, func() {
					r, err := w.receiver().Irecv(6, AnySource, 4, buf)
					if err != nil {
						t.Errorf("receive: %v", err)
						return
					}
					st, err := r.Wait()
					checkRecv(t, "receive", st, err, buf, w.src(), 4, data)
				})
				atSender, atReceiver := w.frames(w.src()), w.frames(w.dst())
				if len(w.engs) == 1 {
					atReceiver = atSender
				}
				rts, cts := count(atReceiver, kRTS, 0), count(atSender, kCTS, 0)
				rmaRTS, rmaCTS := count(atReceiver, kRTS, fRMA), count(atSender, kCTS, fRMA)
				if rts != 1 || cts != 1 {
					t.Fatalf("%d RTS and %d CTS, want one each", rts, cts)
				}
				rma := rmaRTS == 1
				switch {
				case rmaCTS != rmaRTS:
					t.Errorf("the RTS offered RMA: %v, the CTS: %v", rmaRTS == 1, rmaCTS == 1)
				case rma && (count(atReceiver, kFinS, 0) != 1 || count(atSender, kFinR, 0) != 1 || count(atReceiver, kData, 0) != 0):
					t.Errorf("RMA rendezvous without one FIN each way (or with DATA): %+v at the sender, %+v at the receiver", atSender, atReceiver)
				case !rma && (count(atReceiver, kData, 0) != 1 || count(atReceiver, kFinS, 0)+count(atSender, kFinR, 0) != 0):
					t.Errorf("rendezvous by frames without its DATA (or with FINs): %+v at the sender, %+v at the receiver", atSender, atReceiver)
				case known && rma != want:
					t.Errorf("rendezvous by RMA: %v, want %v", rma, want)
				case !known:
					t.Logf("rendezvous by RMA: %v", rma)
				}
			})
		}
	})
}

// TestSsend: a synchronous send completes only once the receive has
// matched, even when the message sits in the receiver's unexpected queue
// and both engines progress meanwhile.
func TestSsend(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		for i, n := range []int{0, 8, w.eager + 1, splitMin + 1} {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				data := pattern(i, n)
				arrived, post := make(chan struct{}), make(chan struct{})
				w.within(t, func() {
					release := sync.OnceFunc(func() { close(post) })
					defer release()
					r, err := w.sender().Isend(7, w.dst(), 1, data, true)
					if err != nil {
						t.Errorf("ssend: %v", err)
						return
					}
					// Its frames move only while it polls (btl/doc.go).
					waitProgress(w.sender(), arrived)
					for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
						if done, _, err := r.Test(); done {
							t.Errorf("ssend completed (%v) before the receive was posted", err)
							return
						}
					}
					release()
					if _, err := r.Wait(); err != nil {
						t.Errorf("ssend: %v", err)
					}
				}, func() {
					e := w.receiver()
					if _, err := e.Probe(7, w.src(), 1); err != nil {
						t.Errorf("probe: %v", err)
					}
					close(arrived)
					waitProgress(e, post)
					buf := make([]byte, n)
					r, err := e.Irecv(7, w.src(), 1, buf)
					if err != nil {
						t.Errorf("receive: %v", err)
						return
					}
					st, err := r.Wait()
					checkRecv(t, "receive", st, err, buf, w.src(), 1, data)
				})
			})
		}
	})
}

// waitProgress polls e until ch is closed.
func waitProgress(e *Engine, ch <-chan struct{}) {
	for {
		select {
		case <-ch:
			return
		default:
			e.Progress()
			runtime.Gosched()
		}
	}
}

// devPtr is a device address for the device-memory cases. No transport
// here reaches device memory, so it is never dereferenced: the engine must
// refuse it before anything would touch it.
const devPtr = 0x7f00_dead_0000

// TestDeviceMemory: with no RMA for device memory and no staging path
// yet, nothing is transferred and neither side waits forever. A send from
// device memory offers its RTS (fDevice) like any rendezvous and fails
// with ErrNoDevicePath once a receive matches it, and so does that
// receive. A receive into device memory matched by a host message fails
// with ErrNoDevicePath while the sender completes (eager) or fails with
// ErrNoDevicePath too (rendezvous: the CTS refuses). Whether the receive
// was posted before the message or after; and both ranks go on working.
func TestDeviceMemory(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		sizes := []int{8, w.eager, w.eager + 1, splitMin + 1}
		for _, c := range []struct {
			name             string
			sendDev, recvDev bool
		}{{"send", true, false}, {"recv", false, true}, {"both", true, true}} {
			for _, mode := range []string{"posted", "unexpected"} {
				for i, n := range sizes {
					t.Run(fmt.Sprintf("%s/%s/%d", c.name, mode, n), func(t *testing.T) {
						ready := make(chan struct{})
						w.within(t, func() {
							<-ready
							m := btl.HostMem(pattern(i, n))
							if c.sendDev {
								m = btl.DeviceMem(0, devPtr, n)
							}
							r, err := w.sender().IsendMem(8, w.dst(), 2, m, i%2 == 1)
							if err != nil {
								t.Errorf("send: %v", err)
								return
							}
							_, err = r.Wait()
							switch {
							case errors.Is(err, ErrNoDevicePath):
							case err == nil && !c.sendDev && n <= w.eager && i%2 == 0:
							default:
								t.Errorf("send of %d bytes (%s): %v; want ErrNoDevicePath (or success for a host eager send)", n, c.name, err)
							}
						}, func() {
							e := w.receiver()
							release, ok := unexpectedFirst(t, e, mode, ready, 8, w.src(), 2)
							defer release()
							if !ok {
								return
							}
							m := btl.HostMem(make([]byte, n))
							if c.recvDev {
								m = btl.DeviceMem(0, devPtr, n)
							}
							r, err := e.IrecvMem(8, w.src(), 2, m)
							if err != nil {
								t.Errorf("receive: %v", err)
								return
							}
							release()
							if _, err := r.Wait(); !errors.Is(err, ErrNoDevicePath) {
								t.Errorf("receive of %d bytes (%s): %v, want ErrNoDevicePath", n, c.name, err)
							}
						})
						checkAlive(t, w)
					})
				}
			}
		}
	})
}

// checkAlive sends a small and a large message from w's sender to its
// receiver: the peer was not failed by what came before.
func checkAlive(t *testing.T, w *world) {
	t.Helper()
	msgs := []msg{{ctx: 9, tag: 1, data: pattern(1, 5)}, {ctx: 9, tag: 2, data: pattern(2, 2*w.eager+1)}}
	w.within(t, func() {
		sendAll(t, w.sender(), w.dst(), msgs)
	}, func() {
		for _, m := range msgs {
			buf := make([]byte, len(m.data))
			r, err := w.receiver().Irecv(9, w.src(), m.tag, buf)
			if err != nil {
				t.Errorf("receive after: %v", err)
				return
			}
			st, err := r.Wait()
			checkRecv(t, "receive after", st, err, buf, w.src(), m.tag, m.data)
		}
	})
}

// inject sends a hand-made frame from e to peer through the real module
// and endpoint the engine would use, with the engine's lock held as for
// its own frames.
func inject(e *Engine, peer int, h header, payload []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	rt, err := btl.Select(e.mods, e.peers[peer])
	if err != nil {
		return err
	}
	f := &btl.Frame{Payload: payload, Owner: frameSink{}}
	h.encode(&f.Hdr)
	return rt.Endpoint.Send(f)
}

// frameSink owns injected frames.
type frameSink struct{}

func (frameSink) FrameDone(*btl.Frame, error) {}

// region is a region's encoding with its fields set by hand, valid or
// not: key bytes of key after the fixed part.
func region(kind, keyLen, reserved byte, addr, n uint64, key int) []byte {
	b := make([]byte, 24+key)
	b[0], b[1], b[5] = kind, keyLen, reserved
	binary.LittleEndian.PutUint64(b[8:], addr)
	binary.LittleEndian.PutUint64(b[16:], n)
	return b
}

// checkFailed reports an error that is not a peer failed by a protocol
// error whose message contains want.
func checkFailed(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrProcFailed) || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v; want ErrProcFailed for a protocol error (ErrProtocol) naming %q", what, err, want)
	}
}

// TestProtocolErrors feeds the engine frames that make no sense, through
// the real btl/self endpoint: the engine fails the peer (itself): a
// pending receive from it and a pending send to it fail with an error
// that wraps ErrProcFailed and ErrProtocol and names the frame, and new
// operations with it fail at once. Nothing panics or hangs.
func TestProtocolErrors(t *testing.T) {
	okRegion := region(byte(btl.MemHost), 0, 0, 0x1000, 10, 0)
	rts := header{kind: kRTS, flags: fRMA, ctx: 1, tag: 1, sreq: 1, length: 10}
	cases := []struct {
		name string
		// send: -1 for none, else the length of a pending Ssend (0 goes
		// by frames, more by RMA) whose id the frame may name.
		send  int
		frame func(sreq uint64) (header, []byte)
		want  string
	}{
		{"cts/unknown-send", -1, func(uint64) (header, []byte) { return header{kind: kCTS, sreq: 999, length: 1}, nil }, "CTS for unknown send 999"},
		{"cts/too-long", 10, func(id uint64) (header, []byte) {
			return header{kind: kCTS, flags: fRMA, sreq: id, rreq: 1, length: 11}, okRegion
		}, "CTS for unknown send"},
		{"cts/rma-for-frames", 0, func(id uint64) (header, []byte) {
			return header{kind: kCTS, flags: fRMA, sreq: id, rreq: 1}, okRegion
		}, "RMA CTS for send"},
		{"cts/bad-region", 10, func(id uint64) (header, []byte) {
			return header{kind: kCTS, flags: fRMA, sreq: id, rreq: 1, length: 10}, region(7, 0, 0, 0x1000, 10, 0)
		}, "CTS: btl: malformed region descriptor: memory kind 7"},
		{"cts/payload-without-flag", 10, func(id uint64) (header, []byte) {
			return header{kind: kCTS, sreq: id, rreq: 1, length: 3}, []byte{1, 2, 3}
		}, "frame kind 3 with 3 payload bytes"},
		{"data/unknown", -1, func(uint64) (header, []byte) { return header{kind: kData, rreq: 999, length: 5}, make([]byte, 5) }, "DATA for unknown receive 999 (5 bytes)"},
		{"data/unknown-empty", -1, func(uint64) (header, []byte) { return header{kind: kData, rreq: 999}, nil }, "DATA for unknown receive 999 (0 bytes)"},
		{"data/to-send-id", 10, func(id uint64) (header, []byte) { return header{kind: kData, rreq: id, length: 4}, make([]byte, 4) }, "DATA for unknown receive"},
		{"fin-s/nothing", -1, func(uint64) (header, []byte) { return header{kind: kFinS, rreq: 5}, nil }, "FIN for unknown receive 5"},
		{"fin-r/nothing", -1, func(uint64) (header, []byte) { return header{kind: kFinR, sreq: 5}, nil }, "FIN for unknown send 5"},
		{"fin-r/frames-send", 0, func(id uint64) (header, []byte) { return header{kind: kFinR, sreq: id}, nil }, "FIN for unknown send"},
		{"kind/0", -1, func(uint64) (header, []byte) { return header{kind: 0}, nil }, "unknown frame kind 0"},
		{"kind/99", -1, func(uint64) (header, []byte) { return header{kind: 99, flags: 0xff}, nil }, "unknown frame kind 99"},
		{"kind/99-payload", -1, func(uint64) (header, []byte) { return header{kind: 99}, make([]byte, 7) }, "frame kind 99 with 7 payload bytes"},
		{"rts/short-region", -1, func(uint64) (header, []byte) { return rts, okRegion[:5] }, "RTS: btl: malformed region descriptor: 5 bytes"},
		{"rts/bad-kind", -1, func(uint64) (header, []byte) { return rts, region(2, 0, 0, 0x1000, 10, 0) }, "memory kind 2"},
		{"rts/key-too-long", -1, func(uint64) (header, []byte) { return rts, region(0, 65, 0, 0x1000, 10, 65) }, "frame kind 2 with 89 payload bytes"},
		{"rts/key-length-mismatch", -1, func(uint64) (header, []byte) { return rts, region(0, 3, 0, 0x1000, 10, 2) }, "key of 3 bytes in 26"},
		{"rts/reserved", -1, func(uint64) (header, []byte) { return rts, region(0, 0, 1, 0x1000, 10, 0) }, "reserved bytes set"},
		{"rts/wrap", -1, func(uint64) (header, []byte) { return rts, region(0, 0, 0, ^uint64(0)-1, 10, 0) }, "wraps"},
		{"rts/payload-without-flag", -1, func(uint64) (header, []byte) {
			return header{kind: kRTS, ctx: 1, tag: 1, sreq: 1, length: 5}, make([]byte, 5)
		}, "frame kind 2 with 5 payload bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := openWorld(t, setup{name: "self", btl: "self"})
			e := w.sender()
			w.within(t, func() {
				rr, err := e.Irecv(1, 0, 77, make([]byte, 16))
				if err != nil {
					t.Errorf("receive: %v", err)
					return
				}
				var sr *Request
				var sreq uint64
				if c.send >= 0 {
					if sr, err = e.Isend(1, 0, 55, pattern(0, c.send), true); err != nil {
						t.Errorf("send: %v", err)
						return
					}
					e.mu.Lock()
					sreq = sr.id
					e.mu.Unlock()
				}
				// Queued behind the send's RTS: the RTS waits unexpected,
				// the send for its CTS, when the bad frame arrives.
				h, p := c.frame(sreq)
				if err := inject(e, 0, h, p); err != nil {
					t.Errorf("inject: %v", err)
					return
				}
				_, err = rr.Wait()
				checkFailed(t, "pending receive", err, c.want)
				if sr != nil {
					_, err = sr.Wait()
					checkFailed(t, "pending send", err, c.want)
				}
				if _, err := e.Isend(1, 0, 1, []byte("x"), false); !errors.Is(err, ErrProcFailed) {
					t.Errorf("send after: %v, want ErrProcFailed", err)
				}
				if _, err := e.Irecv(1, 0, 78, nil); !errors.Is(err, ErrProcFailed) {
					t.Errorf("receive after: %v, want ErrProcFailed", err)
				}
			})
		})
	}
}

// TestProtocolErrorFromPeer: a bad frame from another rank, through the
// real transport between two engines, fails that rank on the receiving
// engine: what waits on it fails, naming the frame.
func TestProtocolErrorFromPeer(t *testing.T) {
	for _, s := range setups() {
		if s.btl == "self" {
			continue // one rank: TestProtocolErrors
		}
		for _, c := range []struct {
			name string
			h    header
			n    int
			want string
		}{
			{"fin", header{kind: kFinS, rreq: 42}, 0, "FIN for unknown receive 42"},
			{"data", header{kind: kData, rreq: 42, length: 100 << 10}, 100 << 10, "DATA for unknown receive 42"},
			{"kind", header{kind: 200}, 0, "unknown frame kind 200"},
		} {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				w := openWorld(t, s)
				done := make(chan struct{})
				w.within(t, func() {
					defer close(done)
					e := w.engs[0]
					rr, err := e.Irecv(1, 1, 5, make([]byte, 8))
					if err != nil {
						t.Errorf("receive: %v", err)
						return
					}
					_, err = rr.Wait()
					checkFailed(t, "receive from rank 1", err, c.want)
					if _, err := e.Isend(1, 1, 1, []byte("x"), false); !errors.Is(err, ErrProcFailed) {
						t.Errorf("send to rank 1 after: %v, want ErrProcFailed", err)
					}
				}, func() {
					e := w.engs[1]
					if err := inject(e, 0, c.h, make([]byte, c.n)); err != nil {
						t.Errorf("inject: %v", err)
						return
					}
					waitProgress(e, done)
				})
			})
		}
	}
}

// TestReleaseReuse: blocking calls release their request right after
// Wait; the engine recycles it, with its RMA state, at once or when its
// last frame is done. The operations that follow, which get recycled
// requests back, move the right bytes from and into the same reused
// buffers, eager, by frames and by RMA below and above the split, some
// synchronous.
func TestReleaseReuse(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		sizes := []int{8, w.eager + 1, splitMin + 5, 0, 100, 2*splitMin + 1, w.eager}
		const rounds = 56
		w.within(t, func() {
			e := w.sender()
			sbuf := make([]byte, 2*splitMin+1)
			for i := range rounds {
				m := sbuf[:sizes[i%len(sizes)]]
				copy(m, pattern(i, len(m)))
				r, err := e.Isend(10, w.dst(), i%3, m, i%4 == 1)
				if err != nil {
					t.Errorf("send %d: %v", i, err)
					return
				}
				if _, err := r.Wait(); err != nil {
					t.Errorf("send %d: %v", i, err)
				}
				e.Release(r)
			}
		}, func() {
			e := w.receiver()
			buf := make([]byte, 2*splitMin+1)
			for i := range rounds {
				r, err := e.Irecv(10, w.src(), i%3, buf)
				if err != nil {
					t.Errorf("receive %d: %v", i, err)
					return
				}
				st, err := r.Wait()
				if !checkRecv(t, fmt.Sprintf("receive %d", i), st, err, buf, w.src(), i%3, pattern(i, sizes[i%len(sizes)])) {
					return
				}
				e.Release(r)
			}
		})
	})
}

// TestFailedRendezvousKeepsItsWire: a rendezvous request that fails
// while its RTS or CTS is still queued in the transport completes at
// once; that frame's payload, the request's registered region encoded in
// its RMA state, must stay as it was sent until the transport is done with
// it, however many rendezvous start meanwhile and take RMA state from the
// pool. Else the peer, which may well be alive, gets a region of zeros or
// of another transfer's buffer, and reads or writes that buffer. On
// btl/self the frame always waits for the next poll: a receive fails
// there when its Get is refused right after its CTS (a region nobody
// registered), a send when its peer is declared failed after its RTS.
func TestFailedRendezvousKeepsItsWire(t *testing.T) {
	for _, side := range []string{"receive", "send"} {
		t.Run(side, func(t *testing.T) {
			w := openWorld(t, setup{name: "self", btl: "self"})
			e := w.sender()
			w.within(t, func() {
				buf := make([]byte, 1000)
				if side == "send" {
					buf = make([]byte, 2*w.eager) // a rendezvous
				}
				var r *Request
				var err error
				if side == "receive" {
					if r, err = e.Irecv(1, 0, 5, buf); err != nil {
						t.Errorf("receive: %v", err)
						return
					}
					rts := header{kind: kRTS, flags: fRMA, ctx: 1, tag: 5, length: 1000, sreq: 77}
					if err := inject(e, 0, rts, region(byte(btl.MemHost), 0, 0, 0x1000, 1000, 0)); err != nil {
						t.Errorf("inject: %v", err)
						return
					}
					e.Progress() // the RTS matches; the CTS is queued; the Get is refused
					// A refused Get sends a failed FIN and waits for the
					// peer's (fFail); the peer dies instead.
					e.PeerFailed(0, errors.New("declared dead by the test"))
				} else {
					if r, err = e.Isend(1, 0, 5, buf, false); err != nil {
						t.Errorf("send: %v", err)
						return
					}
					e.PeerFailed(0, errors.New("declared dead by the test"))
				}
				e.mu.Lock()
				defer e.mu.Unlock()
				if !r.done.Load() || r.ctl.Payload == nil {
					t.Errorf("%s done %v, queued frame's payload %x: want a failed request whose RTS or CTS is still queued", side, r.done.Load(), r.ctl.Payload)
					return
				}
				want := btl.Region{Kind: btl.MemHost, Addr: uint64(btl.HostMem(buf).Addr()), Len: uint64(len(buf))}
				wire := make([]byte, want.EncodedLen())
				want.Encode(wire)
				if !bytes.Equal(r.ctl.Payload, wire) {
					t.Errorf("the queued frame's payload is %x, sent as the %s's region %x (its RMA state was freed when the request failed)", r.ctl.Payload, side, wire)
					return
				}
				// What other rendezvous do: take RMA state from the pool.
				for range 8 {
					x := rndvPool.Get().(*rndv)
					for i := range x.wire {
						x.wire[i] = 0xff
					}
					defer rndvPool.Put(x)
				}
				if !bytes.Equal(r.ctl.Payload, wire) {
					t.Errorf("the queued frame's payload changed under the transport: %x, sent as %x (its RMA state went back to the pool when the request failed)", r.ctl.Payload, wire)
				}
			})
		})
	}
}

// unexpectedFirst returns the receiver's release of ready, on which the
// sender waits. In "unexpected" mode it releases at once and probes until
// the message (ctx, src, tag) has arrived, so that the receives posted
// next find it unexpected; ok is false when the probe failed.
func unexpectedFirst(t *testing.T, e *Engine, mode string, ready chan struct{}, ctx uint32, src, tag int) (release func(), ok bool) {
	release = sync.OnceFunc(func() { close(ready) })
	if mode == "unexpected" {
		release()
		if _, err := e.Probe(ctx, src, tag); err != nil {
			t.Errorf("probe: %v", err)
			return release, false
		}
	}
	return release, true
}

// TestUnreachableSaysNotOpened: a peer that no open transport reaches
// fails with the reasons the others did not open (a tunable out of
// bounds, a read-only /dev/shm), which Init hands over (NotOpened),
// instead of a bare "no transport reaches the peer".
func TestUnreachableSaysNotOpened(t *testing.T) {
	e := Alloc(0, 2)
	mods, _, err := btl.OpenAll(btl.Env{Rank: 0, Size: 2, Handler: Handler(e)}, selfOnly)
	if err != nil {
		t.Fatal(err)
	}
	e.NotOpened([]error{errors.New("btl sm: create: read-only file system")})
	if err := e.Attach(mods, []btl.Peer{{Rank: 0}, {Rank: 1}}); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.IsendNow(0, 1, 0, []byte("x"))
	if !errors.Is(err, btl.ErrUnreachable) || !strings.Contains(err.Error(), "not opened: btl sm: create: read-only file system") {
		t.Fatalf("send to a peer no transport reaches: %v", err)
	}
}
