package mpi

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func initSingleton(t testing.TB) *Comm {
	t.Helper()
	if !Initialized() {
		if err := Init(); err != nil {
			t.Fatal(err)
		}
	}
	return World()
}

// TestRequestAfterComplete: a Request whose completion was reported
// gives its engine request back for reuse, and keeps its outcome: Wait,
// Test and Cancel on it later, after other operations have taken the
// engine's requests it held, report the same status and touch nothing.
func TestRequestAfterComplete(t *testing.T) {
	w := initSingleton(t)
	me := w.Rank()
	rbuf := make([]int32, 4)
	rq, err := Irecv(w, rbuf, me, 7)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := Isend(w, []int32{1, 2, 3}, me, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Waitall([]*Request{rq, sq}); err != nil {
		t.Fatal(err)
	}
	// Reuse the engine's requests many times over, with other tags and
	// lengths, some left posted.
	other := make([]byte, 9)
	var pending []*Request
	for i := range 20 {
		r2, err := Irecv(w, other, me, 8+i)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			pending = append(pending, r2)
			continue
		}
		s2, err := Isend(w, other[:i%9], me, 8+i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Waitall([]*Request{r2, s2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		st, err := rq.Wait()
		if err != nil || st.Source != me || st.Tag != 7 || st.Count() != 3 || st.Cancelled() {
			t.Fatalf("Wait again: %+v (count %d), %v; want source %d, tag 7, 3 elements", st, st.Count(), err, me)
		}
		ok, st, err := rq.Test()
		if !ok || err != nil || st.Tag != 7 || st.Count() != 3 {
			t.Fatalf("Test again: %v %+v %v", ok, st, err)
		}
		if err := rq.Cancel(); err != nil {
			t.Fatalf("Cancel after completion: %v", err)
		}
		if _, err := sq.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if rbuf[0] != 1 || rbuf[2] != 3 || rbuf[3] != 0 {
		t.Fatalf("received %v", rbuf)
	}
	// The pending receives are still theirs: cancel and complete them.
	for _, r := range pending {
		if err := r.Cancel(); err != nil {
			t.Fatal(err)
		}
		st, err := r.Wait()
		if err != nil || !st.Cancelled() {
			t.Fatalf("cancelled receive: %+v, %v", st, err)
		}
	}
}

// TestWindowAllocs: a window of nonblocking operations through the public
// API allocates only what the caller keeps: one Request per Isend and
// Irecv (valid after completion, so pooled only through WaitallFree:
// request.go) and
// Waitall's statuses; the engine's part of each request is reused.
func TestWindowAllocs(t *testing.T) {
	w := initSingleton(t)
	const n = 64
	sbuf, rbuf := make([]byte, 8), make([]byte, 8)
	reqs := make([]*Request, 2*n)
	var failed error
	one := func() {
		if err := selfWindow(w, reqs, sbuf, rbuf); err != nil {
			failed = err
		}
	}
	for range 4 {
		one()
	}
	allocs := testing.AllocsPerRun(20, one)
	if failed != nil {
		t.Fatal(failed)
	}
	if want := float64(2*n + 1); allocs > want {
		t.Errorf("%v allocations per window of %d messages, want at most %v", allocs, n, want)
	}
}

// TestWaitallInto: statuses land in the caller's slice (the receive's
// source, tag and count; a nil request's entry is emptied), nil
// statuses are ignored, a short slice is refused before anything waits,
// and a truncated receive's error comes back as Waitall's would.
func TestWaitallInto(t *testing.T) {
	w := initSingleton(t)
	me := w.Rank()
	rbuf := make([]int16, 5)
	rq, err := Irecv(w, rbuf, me, 11)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := Isend(w, []int16{4, 5, 6}, me, 11)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*Request{rq, nil, sq}
	if err := WaitallInto(reqs, make([]Status, 2)); !errors.Is(err, ErrArg) {
		t.Fatalf("2 statuses for 3 requests: %v, want ErrArg", err)
	}
	if rq.r == nil || rq.fin {
		t.Fatal("the refused call completed the receive")
	}
	sts := []Status{{}, {Tag: -42}, {}}
	if err := WaitallInto(reqs, sts); err != nil {
		t.Fatal(err)
	}
	if st := sts[0]; st.Source != me || st.Tag != 11 || st.Count() != 3 || rbuf[2] != 6 {
		t.Fatalf("receive status %+v (count %d), buffer %v", st, st.Count(), rbuf)
	}
	if sts[1] != emptyStatus {
		t.Fatalf("nil request's entry: %+v, want the empty status (nothing of an earlier window)", sts[1])
	}
	rq, err = Irecv(w, rbuf[:1], me, 12)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Isend(w, []int16{1, 2}, me, 12); err != nil {
		t.Fatal(err)
	}
	if err := WaitallInto([]*Request{rq}, nil); !errors.Is(err, ErrTruncate) || !errors.Is(err, ErrInStatus) {
		t.Fatalf("truncated receive, statuses ignored: %v", err)
	}
	if st, _ := rq.Wait(); st.Tag != 12 || st.Count() != 1 {
		t.Fatalf("status kept by the request: %+v", st)
	}
}

// TestSendrecvReplaceError: SendrecvReplace's errors name it once, and
// its data round-trips to itself (a singleton: its own peer).
func TestSendrecvReplaceError(t *testing.T) {
	w := World()
	_, err := SendrecvReplace(w, []int32{1}, 5, 0, 0, 0)
	if err == nil || !strings.HasPrefix(err.Error(), "mpi: SendrecvReplace: ") || strings.Count(err.Error(), "mpi:") != 1 {
		t.Errorf("SendrecvReplace to rank 5 of 1: %v", err)
	}
	if !errors.Is(err, ErrRank) {
		t.Errorf("SendrecvReplace to rank 5 of 1: %v, want ErrRank", err)
	}
	buf := []int32{7, 8}
	st, err := SendrecvReplace(w, buf, 0, 3, 0, 3)
	if err != nil || buf[0] != 7 || buf[1] != 8 || st.Count() != 2 {
		t.Errorf("SendrecvReplace to itself: %v %v count %d", buf, err, st.Count())
	}
}

// TestWaitFree: WaitFree returns a receive's status and data as Wait does,
// and gives the request back: 100 rounds of Irecv use a handful of
// requests (100 with Wait).
func TestWaitFree(t *testing.T) {
	w := World()
	out, in := []int64{5, 6, 7}, make([]int64, 3)
	seen := map[*Request]bool{}
	for i := range 100 {
		q, err := Irecv(w, in, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		seen[q] = true
		s, err := Isend(w, out, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		st, err := q.WaitFree()
		if err != nil || st.Count() != 3 || st.Source != 0 || st.Tag != 9 || in[2] != 7 {
			t.Fatalf("round %d: WaitFree: %v, count %d source %d tag %d, got %v", i, err, st.Count(), st.Source, st.Tag, in)
		}
		if _, err := s.WaitFree(); err != nil {
			t.Fatal(err)
		}
		in[2] = 0
	}
	if len(seen) > 4 {
		t.Errorf("100 Irecvs used %d requests: WaitFree gave them back to none", len(seen))
	}
	if st, err := (*Request)(nil).WaitFree(); err != nil || st != emptyStatus {
		t.Errorf("nil request: %v %v", st, err)
	}
}

// TestCancelWhileCompleting: a Cancel from another goroutine that races
// with the completion of its receive (Wait, Test, Waitall, Waitany,
// WaitContext) either
// withdraws that receive or does nothing, and never touches the receive
// that takes the engine's request next (the completing side gives the
// engine's request back while Cancel may be reading it). Each round the
// canceller keeps cancelling receive a until told to stop, while this
// goroutine completes a (message 1) and then posts receive b, which
// usually gets a's engine request, and completes it (message 2): b must
// never come back cancelled, and a, when cancelled, leaves its message
// to the next receive of its tag. Run it with -race too.
func TestCancelWhileCompleting(t *testing.T) {
	w := initSingleton(t)
	me := w.Rank()
	complete := []func(*Request) (Status, error){
		(*Request).Wait,
		func(q *Request) (Status, error) {
			for {
				if ok, st, err := q.Test(); ok {
					return st, err
				}
			}
		},
		func(q *Request) (Status, error) {
			sts, err := Waitall([]*Request{q})
			return sts[0], err
		},
		func(q *Request) (Status, error) {
			_, st, err := Waitany([]*Request{q})
			return st, err
		},
		func(q *Request) (Status, error) {
			return q.WaitContext(context.Background())
		},
	}
	cancelled := 0
	for round := range 3000 {
		done := complete[round%len(complete)]
		abuf, bbuf := make([]byte, 1), make([]byte, 1)
		a, err := Irecv(w, abuf, me, 1)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		quit := make(chan error)
		var started sync.WaitGroup
		var begin atomic.Bool
		started.Add(1)
		go func() {
			started.Done()
			for !begin.Load() {
			}
			for i := range round % 7 * 8 {
				spinSink.Add(int64(i))
			}
			for {
				select {
				case <-stop:
					quit <- nil
					return
				default:
				}
				if err := a.Cancel(); err != nil {
					quit <- err
					return
				}
			}
		}()
		started.Wait()
		begin.Store(true)
		for i := range round % 16 * 8 { // meet the canceller at varying points
			spinSink.Add(int64(i))
		}
		if err := Send(w, []byte{1}, me, 1); err != nil {
			t.Fatal(err)
		}
		sta, err := done(a)
		if err != nil {
			t.Fatalf("round %d: receive a: %v", round, err)
		}
		b, err := Irecv(w, bbuf, me, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := Send(w, []byte{2}, me, 2); err != nil {
			t.Fatal(err)
		}
		stb, err := done(b)
		close(stop)
		if err := <-quit; err != nil {
			t.Fatalf("round %d: Cancel: %v", round, err)
		}
		if err != nil || stb.Cancelled() || bbuf[0] != 2 {
			t.Fatalf("round %d: receive b, posted after a completed: %+v, %v, got %d; want message 2, not cancelled (a Cancel of a reached b)", round, stb, err, bbuf[0])
		}
		if sta.Cancelled() {
			// Message 1 is still to be received.
			cancelled++
			if _, err := Recv(w, abuf, me, 1); err != nil || abuf[0] != 1 {
				t.Fatalf("round %d: message 1 after a was cancelled: %v, got %d", round, err, abuf[0])
			}
		} else if abuf[0] != 1 {
			t.Fatalf("round %d: receive a got %d, want 1", round, abuf[0])
		}
	}
	t.Logf("%d of 3000 receives a cancelled", cancelled)
}

var spinSink atomic.Int64

// TestCancelNotStarted: Cancel of a persistent receive not started fails
// with ErrRequest, as its doc says (it returned nil), and leaves it
// startable.
func TestCancelNotStarted(t *testing.T) {
	w := initSingleton(t)
	me := w.Rank()
	buf := make([]byte, 1)
	q, err := RecvInit(w, buf, me, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(); !errors.Is(err, ErrRequest) {
		t.Fatalf("Cancel of a RecvInit not started: %v, want ErrRequest", err)
	}
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	if err := Send(w, []byte{7}, me, 3); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Wait(); err != nil || st.Cancelled() || buf[0] != 7 {
		t.Fatalf("after Start: %+v, %v, got %d", st, err, buf[0])
	}
	if err := q.Free(); err != nil {
		t.Fatal(err)
	}
}

// TestStatusFields: a Status has at most four fields, so that the Go
// compiler keeps one in registers (it treats structs of more fields as
// memory: every Status handed back through a call was then stored
// piecewise and reloaded whole, a store-forwarding stall at each level;
// status.go, unit).
func TestStatusFields(t *testing.T) {
	if n := reflect.TypeOf(Status{}).NumField(); n > 4 {
		t.Fatalf("Status has %d fields; keep it at 4 or fewer (status.go)", n)
	}
	for _, elem := range []int{0, 1, 4, 8, 1 << 20} {
		for _, c := range []bool{false, true} {
			s := Status{bytes: 3 * elem, unit: unitOf(elem, c)}
			if s.elem() != elem || s.Cancelled() != c {
				t.Fatalf("unitOf(%d, %v): elem %d, cancelled %v", elem, c, s.elem(), s.Cancelled())
			}
		}
	}
}
