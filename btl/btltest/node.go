package btltest

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
)

// node is one rank of a case: a module, the mutex that stands for p2p's
// engine lock (held around every call into the module), what it received
// and what it sent.
type node struct {
	rank int
	mod  btl.Module
	mu   sync.Mutex
	rec  recorder
	snt  sender
	eps  map[int]btl.Endpoint
	// closed: the case closed the module itself; the cleanup skips it.
	closed bool
}

// recorder is a node's btl.Handler: it checks every frame against what the
// sender's pattern says, in order per source.
type recorder struct {
	n       *node
	next    map[int]int // next expected index per source
	got     map[int]int // frames completed per source
	bytes   int64
	begun   map[int]int // Begin calls per source
	inFrame map[int]bool
	failed  map[int]error
	errs    []string
	// onBegin, if set, is called after each Begin (the lock is held).
	onBegin func(src, n int)
}

func (r *recorder) init(n *node) {
	r.n = n
	r.next, r.got, r.begun = map[int]int{}, map[int]int{}, map[int]int{}
	r.inFrame, r.failed = map[int]bool{}, map[int]error{}
}

func (r *recorder) errorf(format string, a ...any) {
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf("rank %d: ", r.n.rank)+fmt.Sprintf(format, a...))
	}
}

func (r *recorder) Begin(src int, h *btl.Header, n int) []byte {
	if r.inFrame[src] {
		r.errorf("Begin from rank %d inside a frame", src)
	}
	if _, ok := r.failed[src]; ok {
		r.errorf("Begin from rank %d after PeerFailed", src)
	}
	r.inFrame[src] = true
	r.begun[src]++
	if r.onBegin != nil {
		r.onBegin(src, n)
	}
	return make([]byte, n)
}

func (r *recorder) End(src int, h *btl.Header, data []byte) {
	if !r.inFrame[src] {
		r.errorf("End from rank %d without Begin", src)
	}
	r.inFrame[src] = false
	hs, idx, n, ok := parseHeader(h)
	switch {
	case !ok:
		r.errorf("from rank %d: frame %d: header damaged", src, r.next[src])
	case hs != src:
		r.errorf("frame from rank %d claims rank %d", src, hs)
	case idx != r.next[src]:
		r.errorf("from rank %d: frame %d arrived when %d was due (FIFO broken)", src, idx, r.next[src])
	case n != len(data):
		r.errorf("from rank %d: frame %d: %d bytes, sent %d", src, idx, len(data), n)
	case !samePayload(src, idx, data):
		r.errorf("from rank %d: frame %d (%d bytes): payload damaged", src, idx, n)
	}
	r.next[src] = idx + 1
	r.got[src]++
	r.bytes += int64(len(data))
}

func (r *recorder) PeerFailed(src int, err error) {
	if _, dup := r.failed[src]; dup {
		r.errorf("PeerFailed(%d) called twice", src)
	}
	if err == nil {
		r.errorf("PeerFailed(%d) with a nil error", src)
	}
	r.failed[src] = err
	r.inFrame[src] = false
}

// sender issues frames and counts their completions.
type sender struct {
	n      *node
	next   map[int]int // next index per destination
	frames map[*btl.Frame]bool
	done   int
	ok     int
	fails  []error
}

func (s *sender) init(n *node) {
	s.n, s.next, s.frames = n, map[int]int{}, map[*btl.Frame]bool{}
}

func (s *sender) FrameDone(f *btl.Frame, err error) {
	if !s.frames[f] {
		s.n.rec.errorf("FrameDone for a frame not sent or already done")
		return
	}
	delete(s.frames, f)
	s.done++
	if err != nil {
		s.fails = append(s.fails, err)
		return
	}
	s.ok++
}

// send hands the next frame of n bytes for dst to the module (the lock is
// held). An error from Send is returned; the frame is then not counted.
func (nd *node) send(dst, n int) error {
	ep := nd.eps[dst]
	if ep == nil {
		return fmt.Errorf("rank %d: no endpoint to rank %d", nd.rank, dst)
	}
	idx := nd.snt.next[dst]
	f := &btl.Frame{Payload: pattern(nd.rank, idx, n), Owner: &nd.snt}
	makeHeader(&f.Hdr, nd.rank, idx, n)
	nd.snt.frames[f] = true
	if err := ep.Send(f); err != nil {
		delete(nd.snt.frames, f)
		return err
	}
	nd.snt.next[dst] = idx + 1
	return nil
}

// outstanding is the number of frames sent and not yet completed.
func (nd *node) outstanding() int { return len(nd.snt.frames) }

// progress polls once under the lock.
func (nd *node) progress() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.mod.Progress()
}

// idler passes the time between polls that found nothing, as p2p does:
// a few free polls, then sched-friendly yields, then the module's Wait.
type idler struct {
	idle int
}

func (i *idler) pass(nd *node, ev int) {
	if ev > 0 {
		i.idle = 0
		return
	}
	i.idle++
	switch {
	case i.idle < 64:
	case i.idle < 256:
		runtime.Gosched()
	default:
		if w, ok := nd.mod.(btl.Waiter); ok {
			nd.mu.Lock()
			w.Wait(200 * time.Microsecond)
			nd.mu.Unlock()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// drive runs every node in a goroutine of its own: each polls its module
// and calls step (under its lock) until step has reported true for all
// nodes at once, or fails the test at the deadline with every goroutine's
// stack.
func drive(t testing.TB, timeout time.Duration, nodes []*node, step func(nd *node) (bool, error)) {
	t.Helper()
	var stop atomic.Bool
	done := make([]atomic.Bool, len(nodes))
	errc := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var id idler
			for !stop.Load() {
				nd.mu.Lock()
				ev := nd.mod.Progress()
				ok, err := step(nd)
				nd.mu.Unlock()
				if err != nil {
					errc <- err
					return
				}
				done[i].Store(ok)
				all := true
				for j := range done {
					all = all && done[j].Load()
				}
				if all {
					return
				}
				id.pass(nd, ev)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case err := <-errc:
		stop.Store(true)
		<-finished
		t.Fatal(err)
	case <-time.After(timeout):
		stop.Store(true)
		var state []string
		for _, nd := range nodes {
			if nd.mu.TryLock() {
				state = append(state, nd.state())
				nd.mu.Unlock()
			} else {
				state = append(state, fmt.Sprintf("rank %d: busy inside its module", nd.rank))
			}
		}
		t.Fatalf("deadline %v passed; %v\n%s", timeout, state, stacks())
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	for _, nd := range nodes {
		nd.mu.Lock()
		errs := nd.rec.errs
		nd.mu.Unlock()
		for _, e := range errs {
			t.Error(e)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func (nd *node) state() string {
	return fmt.Sprintf("rank %d: received %v (began %v), sent %v, %d outstanding, %d done (%d failed), peers failed %v",
		nd.rank, nd.rec.got, nd.rec.begun, nd.snt.next, nd.outstanding(), nd.snt.done, len(nd.snt.fails), nd.rec.failed)
}

func stacks() string {
	buf := make([]byte, 4<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

var jobSeq atomic.Int64

// newJob returns a job id unique to this process and case.
func newJob() string {
	return fmt.Sprintf("btltest%d-%d", os.Getpid(), jobSeq.Add(1))
}
