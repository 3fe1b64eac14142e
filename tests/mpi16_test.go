package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun/gorun/mpi"
)

// Issue 16: the rest of MPI that programs use (matched probe, cancel,
// request completion, persistent requests, ...), each against a result
// computed sequentially.

func init() {
	rankCases["mprobe"] = caseMprobe
	rankCases["cancel"] = caseCancel
}

// objMsg is what caseMprobe's senders send: its own size and origin, so
// that a receiver that got another message's bytes sees it.
type objMsg struct {
	From, Seq int
	Pad       []byte
}

// caseMprobe: every rank but 0 sends 40 objects of very different sizes
// (a few bytes to past the eager limit) to rank 0 with AnySource; rank 0
// receives them with RecvObj from 4 goroutines at once, AnySource and
// AnyTag. With Probe then Recv, two goroutines could probe one message
// and one of them receive the next (truncated, or decoding another
// message): with Mprobe each gets whole messages, each exactly once, and
// each sender's in order. Then Mprobe, Improbe and Mrecv directly: a
// taken message is invisible to Iprobe, a Message is received once, and
// ProcNull gives an empty message.
func caseMprobe(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	const per = 40
	size := func(from, seq int) int { return (from*7 + seq*13) % 5 * 40000 / (1 + seq%3) }
	if me != 0 {
		for s := range per {
			if err := mpi.SendObj(w, objMsg{From: me, Seq: s, Pad: make([]byte, size(me, s))}, 0, s%3); err != nil {
				return err
			}
		}
	} else {
		var mu sync.Mutex
		seen := map[[2]int]bool{}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		total := per * (n - 1)
		got := 0
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each goroutine takes a sender's messages in their order.
				next := make([]int, n)
				for {
					mu.Lock()
					if got == total {
						mu.Unlock()
						return
					}
					got++
					mu.Unlock()
					var m objMsg
					st, err := mpi.RecvObj(w, &m, mpi.AnySource, mpi.AnyTag)
					if err != nil {
						errs <- err
						return
					}
					if st.Source != m.From || st.Tag != m.Seq%3 || len(m.Pad) != size(m.From, m.Seq) {
						errs <- fmt.Errorf("RecvObj: status %+v for message %d of rank %d with %d bytes of padding (want %d)", st, m.Seq, m.From, len(m.Pad), size(m.From, m.Seq))
						return
					}
					if m.Seq < next[m.From] {
						errs <- fmt.Errorf("message %d of rank %d received after its message %d", m.Seq, m.From, next[m.From]-1)
						return
					}
					next[m.From] = m.Seq + 1
					mu.Lock()
					dup := seen[[2]int{m.From, m.Seq}]
					seen[[2]int{m.From, m.Seq}] = true
					mu.Unlock()
					if dup {
						errs <- fmt.Errorf("message %d of rank %d received twice", m.Seq, m.From)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}

	// Direct use: rank 1 sends tags 1 and 2 to rank 0.
	if n < 2 {
		return nil
	}
	switch me {
	case 1:
		if err := mpi.Send(w, []int32{11, 12, 13}, 0, 1); err != nil {
			return err
		}
		if err := mpi.Send(w, []int32{21}, 0, 2); err != nil {
			return err
		}
	case 0:
		m, st, err := mpi.Mprobe(w, 1, mpi.AnyTag)
		if err != nil || st.Tag != 1 || mpi.GetCount[int32](st) != 3 {
			return fmt.Errorf("Mprobe: %+v %v, want tag 1 with 3 int32", st, err)
		}
		// The taken message is no longer visible; the next one is.
		st2, err := mpi.Probe(w, 1, mpi.AnyTag)
		if err != nil || st2.Tag != 2 {
			return fmt.Errorf("Probe after Mprobe: %+v %v, want the tag-2 message", st2, err)
		}
		if ok, _, _ := mpi.Iprobe(w, 1, 1); ok {
			return fmt.Errorf("Iprobe still sees the message Mprobe took")
		}
		buf := make([]int32, 3)
		q, err := mpi.Imrecv(buf, m)
		if err != nil {
			return err
		}
		if st, err := q.Wait(); err != nil || st.Source != 1 || st.Count() != 3 || buf[0] != 11 || buf[2] != 13 {
			return fmt.Errorf("Imrecv: %+v %v %v", st, err, buf)
		}
		if _, err := mpi.Mrecv(buf, m); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("second Mrecv of one message: %v, want ErrRequest", err)
		}
		m2, st, err := mpi.Improbe(w, mpi.AnySource, 2)
		for m2 == nil && err == nil {
			m2, st, err = mpi.Improbe(w, mpi.AnySource, 2)
		}
		if err != nil || st.Source != 1 {
			return fmt.Errorf("Improbe: %+v %v", st, err)
		}
		one := make([]int32, 1)
		if st, err := mpi.Mrecv(one, m2); err != nil || one[0] != 21 || st.Tag != 2 {
			return fmt.Errorf("Mrecv: %+v %v %v", st, err, one)
		}
		if m, _, err := mpi.Improbe(w, mpi.AnySource, mpi.AnyTag); m != nil || err != nil {
			return fmt.Errorf("Improbe with nothing waiting: %v %v", m, err)
		}
		pn, st, err := mpi.Mprobe(w, mpi.ProcNull, 5)
		if err != nil || st.Source != mpi.ProcNull {
			return fmt.Errorf("Mprobe(ProcNull): %+v %v", st, err)
		}
		if st, err := mpi.Mrecv(one, pn); err != nil || st.Source != mpi.ProcNull || st.Count() != 0 {
			return fmt.Errorf("Mrecv of the ProcNull message: %+v %v", st, err)
		}
		if _, err := mpi.Mrecv(one, nil); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Mrecv(nil message): %v, want ErrRequest", err)
		}
	}
	return nil
}

func TestMprobe(t *testing.T) { job{np: 3, cas: "mprobe"}.ok(t) }

// caseCancel: rank 0 cancels a receive nobody has sent to, gives up a
// WaitContext on another (already-ended and timed-out contexts), and
// cancels none of the matched ones. Then rank 1 sends what those receives
// asked for: the next receives get every message, so the withdrawn ones
// took none. A send cannot be cancelled (ErrRequest, and it still
// completes).
func caseCancel(w *mpi.Comm) error {
	me := w.Rank()
	if w.Size() < 2 {
		return nil
	}
	switch me {
	case 0:
		a := make([]int, 1)
		q, err := mpi.Irecv(w, a, 1, 9)
		if err != nil {
			return err
		}
		if err := q.Cancel(); err != nil {
			return fmt.Errorf("Cancel: %v", err)
		}
		if st, err := q.Wait(); err != nil || !st.Cancelled() {
			return fmt.Errorf("cancelled receive: %+v %v, want a cancelled status and no error", st, err)
		}
		// A context that has ended already, then one that ends while
		// the call waits.
		ended, stop := context.WithCancel(context.Background())
		stop()
		soon, stop2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer stop2()
		for i, ctx := range []context.Context{ended, soon} {
			q, err := mpi.Irecv(w, a, 1, 9)
			if err != nil {
				return err
			}
			st, err := q.WaitContext(ctx)
			if !errors.Is(err, ctx.Err()) || !st.Cancelled() {
				return fmt.Errorf("WaitContext %d: %+v %v, want %v and a cancelled status", i, st, err, ctx.Err())
			}
		}
		if err := mpi.Barrier(w); err != nil {
			return err
		}
		// Rank 1 now sends 7 then 8 with tag 9: the withdrawn receives
		// took neither.
		for _, want := range []int{7, 8} {
			q, err := mpi.Irecv(w, a, 1, 9)
			if err != nil {
				return err
			}
			st, err := q.WaitContext(context.Background())
			if err != nil || st.Cancelled() || a[0] != want {
				return fmt.Errorf("receive after the cancelled ones: %v (%+v, %v), want %d", a[0], st, err, want)
			}
		}
		// A matched receive is not withdrawn: rank 1 has sent 5 with
		// tag 10 before the barrier below.
		if err := mpi.Barrier(w); err != nil {
			return err
		}
		if _, err := mpi.Probe(w, 1, 10); err != nil {
			return err
		}
		q, err = mpi.Irecv(w, a, 1, 10)
		if err != nil {
			return err
		}
		q.Cancel()
		if st, err := q.Wait(); err != nil || st.Cancelled() || a[0] != 5 {
			return fmt.Errorf("cancel of a matched receive: %v (%+v, %v), want 5 received", a[0], st, err)
		}
	case 1:
		if err := mpi.Barrier(w); err != nil {
			return err
		}
		for _, v := range []int{7, 8} {
			q, err := mpi.Isend(w, []int{v}, 0, 9)
			if err != nil {
				return err
			}
			if err := q.Cancel(); !errors.Is(err, mpi.ErrRequest) {
				return fmt.Errorf("Cancel of a send: %v, want ErrRequest", err)
			}
			if _, err := q.Wait(); err != nil {
				return err
			}
		}
		if err := mpi.Send(w, []int{5}, 0, 10); err != nil {
			return err
		}
		if err := mpi.Barrier(w); err != nil {
			return err
		}
	default:
		for range 2 {
			if err := mpi.Barrier(w); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestCancel(t *testing.T) { job{np: 3, cas: "cancel"}.ok(t) }

func init() {
	rankCases["requests"] = caseRequests
	rankCases["persist-ring"] = casePersistRing
}

// caseRequests: per-request errors from Waitall, Testany, Testsome and
// Waitsome against what was sent, and persistent requests' life cycle.
func caseRequests(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	if n < 3 {
		return fmt.Errorf("needs 3 ranks")
	}
	// Waitall: rank 1 sends 3 messages of 2 ints; rank 0's second
	// receive has room for 1 only.
	if me == 1 {
		for k := range 3 {
			if err := mpi.Send(w, []int{k, k}, 0, k); err != nil {
				return err
			}
		}
	}
	if me == 0 {
		bufs := [][]int{make([]int, 2), make([]int, 1), make([]int, 2)}
		reqs := make([]*mpi.Request, 3)
		for k := range reqs {
			var err error
			if reqs[k], err = mpi.Irecv(w, bufs[k], 1, k); err != nil {
				return err
			}
		}
		sts, err := mpi.Waitall(reqs)
		var re *mpi.RequestErrors
		if !errors.As(err, &re) || len(re.Errs) != 3 || re.Errs[0] != nil || re.Errs[2] != nil ||
			!errors.Is(re.Errs[1], mpi.ErrTruncate) || !errors.Is(err, mpi.ErrTruncate) || !errors.Is(err, mpi.ErrInStatus) {
			return fmt.Errorf("Waitall with a truncated receive: %v, want a RequestErrors with only request 1 truncated", err)
		}
		if sts[0].Count() != 2 || sts[2].Count() != 2 || bufs[2][1] != 2 || bufs[1][0] != 1 {
			return fmt.Errorf("Waitall: statuses %+v, buffers %v", sts, bufs)
		}
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}

	// Testany, Testsome, Waitsome: every other rank sends its rank to
	// rank 0 three times, tags 0, 1, 2; rank 0 takes tag 0 with Testany,
	// tag 1 with Testsome, tag 2 with Waitsome.
	if me != 0 {
		for tag := range 3 {
			if err := mpi.Send(w, []int{me}, 0, tag); err != nil {
				return err
			}
		}
	} else {
		for tag, how := range []string{"Testany", "Testsome", "Waitsome"} {
			bufs := make([][]int, n)
			reqs := make([]*mpi.Request, n) // reqs[0] stays nil
			for r := 1; r < n; r++ {
				bufs[r] = []int{-1}
				var err error
				if reqs[r], err = mpi.Irecv(w, bufs[r], r, tag); err != nil {
					return err
				}
			}
			seen := map[int]bool{}
			for len(seen) < n-1 {
				var ix []int
				var sts []mpi.Status
				var err error
				switch how {
				case "Testany":
					var i int
					var ok bool
					var st mpi.Status
					i, ok, st, err = mpi.Testany(reqs)
					if ok && i >= 0 {
						ix, sts = []int{i}, []mpi.Status{st}
					} else if ok {
						return fmt.Errorf("Testany: no active request with %d of %d received", len(seen), n-1)
					}
				case "Testsome":
					ix, sts, err = mpi.Testsome(reqs)
				default:
					ix, sts, err = mpi.Waitsome(reqs)
					if len(ix) == 0 {
						return fmt.Errorf("Waitsome returned nothing with %d of %d received", len(seen), n-1)
					}
				}
				if err != nil {
					return fmt.Errorf("%s: %v", how, err)
				}
				for k, i := range ix {
					if seen[i] || reqs[i] != nil || bufs[i][0] != i || sts[k].Source != i || sts[k].Tag != tag {
						return fmt.Errorf("%s reported request %d (seen before %v, entry %v, value %d, status %+v)", how, i, seen[i], reqs[i], bufs[i][0], sts[k])
					}
					seen[i] = true
				}
			}
			if i, ok, _, err := mpi.Testany(reqs); i != -1 || !ok || err != nil {
				return fmt.Errorf("Testany with no active request: %d %v %v, want -1 true", i, ok, err)
			}
			if ix, _, err := mpi.Waitsome(reqs); ix != nil || err != nil {
				return fmt.Errorf("Waitsome with no active request: %v %v, want none", ix, err)
			}
		}
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}

	// Persistent: the life cycle on a ring of 4 runs, Waitany keeping
	// the persistent entries.
	right, left := (me+1)%n, (me-1+n)%n
	x, y := []int{me}, []int{-1}
	sq, err := mpi.SendInit(w, x, right, 4)
	if err != nil {
		return err
	}
	rq, err := mpi.RecvInit(w, y, left, 4)
	if err != nil {
		return err
	}
	if st, err := rq.Wait(); err != nil || st.Count() != 0 {
		return fmt.Errorf("Wait on a request never started: %+v %v, want at once, empty", st, err)
	}
	reqs := []*mpi.Request{sq, rq}
	for k := range 4 {
		if err := mpi.Startall(reqs); err != nil {
			return err
		}
		if err := rq.Start(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Start of an active request: %v, want ErrRequest", err)
		}
		if err := rq.Free(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Free of an active request: %v, want ErrRequest", err)
		}
		for range 2 {
			i, _, err := mpi.Waitany(reqs)
			if err != nil || i < 0 || reqs[i] == nil {
				return fmt.Errorf("Waitany on persistent requests: %d %v, entries %v", i, err, reqs)
			}
		}
		if i, _, _ := mpi.Waitany(reqs); i != -1 {
			return fmt.Errorf("Waitany with both persistent requests inactive: %d, want -1", i)
		}
		want := ((me-k-1)%n+n)%n + k
		if y[0] != want {
			return fmt.Errorf("persistent run %d: got %d from rank %d, want %d", k, y[0], left, want)
		}
		x[0] = y[0] + 1
	}
	for _, q := range reqs {
		if err := q.Free(); err != nil {
			return err
		}
		if err := q.Start(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Start after Free: %v, want ErrRequest", err)
		}
	}
	if _, err := mpi.SendInit(w, x, n, 0); !errors.Is(err, mpi.ErrRank) {
		return fmt.Errorf("SendInit to rank %d: %v, want ErrRank", n, err)
	}
	if _, err := mpi.RecvInit(w, x, 0, -5); !errors.Is(err, mpi.ErrTag) {
		return fmt.Errorf("RecvInit with tag -5: %v, want ErrTag", err)
	}
	// A persistent receive can be cancelled, and started again.
	if me == 0 {
		z := []int{0}
		q, err := mpi.RecvInit(w, z, 1, 99)
		if err != nil {
			return err
		}
		for range 2 {
			if err := q.Start(); err != nil {
				return err
			}
			q.Cancel()
			if st, err := q.Wait(); err != nil || !st.Cancelled() {
				return fmt.Errorf("cancelled persistent receive: %+v %v", st, err)
			}
		}
		q.Free()
	}
	return nil
}

func TestRequests(t *testing.T) { job{np: 4, cas: "requests"}.ok(t) }

// casePersistRing is tests/openmpi/persist.c in Go: persistent requests
// around a ring, then SendrecvReplace shifting by two; rank 0 prints every
// rank's result in the C program's format.
func casePersistRing(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	const rounds = 5
	x, y := make([]float64, 4), make([]float64, 4)
	for i := range x {
		x[i] = float64(me*10 + i)
	}
	s, err := mpi.SendInit(w, x, (me+1)%n, 3)
	if err != nil {
		return err
	}
	r, err := mpi.RecvInit(w, y, (me-1+n)%n, 3)
	if err != nil {
		return err
	}
	reqs := []*mpi.Request{s, r}
	for k := range rounds {
		if err := mpi.Startall(reqs); err != nil {
			return err
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return err
		}
		for i := range x {
			x[i] = y[i]*0.5 + float64(k+i)
		}
	}
	s.Free()
	r.Free()
	v := []int32{int32(me), int32(me * me), int32(-me)}
	for k := range rounds {
		if _, err := mpi.SendrecvReplace(w, v, (me+2)%n, 7, (me-2+2*n)%n, 7); err != nil {
			return err
		}
		v[0] += int32(k)
	}
	allx := make([]float64, 4*n)
	allv := make([]int32, 3*n)
	if err := mpi.Gather(w, x, allx, 0); err != nil {
		return err
	}
	if err := mpi.Gather(w, v, allv, 0); err != nil {
		return err
	}
	if me == 0 {
		for i := range n {
			fmt.Printf("rank %d: x %.17g %.17g %.17g %.17g v %d %d %d\n", i, allx[4*i], allx[4*i+1], allx[4*i+2], allx[4*i+3],
				allv[3*i], allv[3*i+1], allv[3*i+2])
		}
	}
	return nil
}

// TestPersistAgainstOpenMPI: persistent requests and SendrecvReplace give
// the lines tests/openmpi/persist.c gives under Open MPI, and the ones a
// sequential simulation of the ring gives.
func TestPersistAgainstOpenMPI(t *testing.T) {
	for _, np := range []int{1, 3, 4} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) {
			got := job{np: np, cas: "persist-ring"}.ok(t).stdout
			if seq := persistSequential(np, 5); got != seq {
				t.Fatalf("gorun:\n%s\nsequential:\n%s", got, seq)
			}
			ref := openmpi(t)
			if want := mpirun(t, np, filepath.Join(ref, "persist")); got != want {
				t.Fatalf("gorun:\n%s\nOpen MPI:\n%s", got, want)
			}
		})
	}
}

// persistSequential computes casePersistRing's output in one process.
func persistSequential(n, rounds int) string {
	x := make([][]float64, n)
	v := make([][]int32, n)
	for r := range n {
		x[r] = []float64{float64(r * 10), float64(r*10 + 1), float64(r*10 + 2), float64(r*10 + 3)}
		v[r] = []int32{int32(r), int32(r * r), int32(-r)}
	}
	for k := range rounds {
		nx := make([][]float64, n)
		for r := range n {
			from := x[(r-1+n)%n]
			nx[r] = make([]float64, 4)
			for i := range 4 {
				nx[r][i] = from[i]*0.5 + float64(k+i)
			}
		}
		x = nx
	}
	for k := range rounds {
		nv := make([][]int32, n)
		for r := range n {
			nv[r] = append([]int32(nil), v[(r-2+2*n)%n]...)
			nv[r][0] += int32(k)
		}
		v = nv
	}
	var b strings.Builder
	for r := range n {
		fmt.Fprintf(&b, "rank %d: x %.17g %.17g %.17g %.17g v %d %d %d\n", r, x[r][0], x[r][1], x[r][2], x[r][3], v[r][0], v[r][1], v[r][2])
	}
	return b.String()
}

func init() {
	rawCases["not-live"] = caseNotLive
	rankCases["objcoll"] = caseObjColl
}

// caseNotLive (issue 13): World and Self before Init return a
// communicator whose calls fail with ErrNotInit saying to call Init (no
// panic); after Finalize the same calls, on the old world too, say that
// Finalize was called.
func caseNotLive() int {
	check := func(when, want string, c *mpi.Comm) error {
		if c == nil || c.Size() != 0 || c.Rank() != mpi.Undefined {
			return fmt.Errorf("%s: World() = %v, want a communicator of no process", when, c)
		}
		buf := []int{1}
		errs := map[string]error{"Send": mpi.Send(c, buf, 0, 0), "Barrier": mpi.Barrier(c),
			"Allreduce": mpi.Allreduce(c, buf, buf, mpi.Sum)}
		_, errs["Recv"] = mpi.Recv(c, buf, mpi.AnySource, 0)
		_, errs["Isend"] = mpi.Isend(c, buf, 0, 0)
		_, _, errs["Mprobe"] = mpi.Mprobe(c, mpi.AnySource, 0)
		_, errs["Dup"] = c.Dup()
		_, errs["Group"] = c.Group()
		_, errs["GatherObj"] = mpi.GatherObj(c, 1, 0)
		_, errs["SendInit"] = mpi.SendInit(c, buf, 0, 0)
		for op, err := range errs {
			if !errors.Is(err, mpi.ErrNotInit) || !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%s: %s: %v, want ErrNotInit saying %q", when, op, err, want)
			}
		}
		return nil
	}
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "FAIL:", err); return 1 }
	for _, c := range []*mpi.Comm{mpi.World(), mpi.Self()} {
		if err := check("before Init", "call mpi.Init first", c); err != nil {
			return fail(err)
		}
	}
	if err := mpi.Init(); err != nil {
		return fail(err)
	}
	w := mpi.World()
	if err := mpi.Finalize(); err != nil {
		return fail(err)
	}
	for _, c := range []*mpi.Comm{mpi.World(), mpi.Self()} {
		if err := check("after Finalize", "Finalize was called", c); err != nil {
			return fail(err)
		}
	}
	if err := mpi.Send(w, []int{1}, 0, 0); !errors.Is(err, mpi.ErrNotInit) || !strings.Contains(err.Error(), "Finalize was called") {
		return fail(fmt.Errorf("Send on the world after Finalize: %v, want ErrNotInit saying Finalize was called", err))
	}
	if err := mpi.Finalize(); !errors.Is(err, mpi.ErrNotInit) || !strings.Contains(err.Error(), "Finalize was called") {
		return fail(fmt.Errorf("second Finalize: %v", err))
	}
	return 0
}

func TestNotLive(t *testing.T) { job{np: 2, cas: "not-live"}.ok(t) }

// objItem is a value of caseObjColl: a map and a string of a size that
// depends on the rank, so that the encodings differ in length.
type objItem struct {
	Rank  int
	Name  string
	Items map[string]int
}

func mkItem(r, salt int) objItem {
	return objItem{Rank: r, Name: strings.Repeat("x", (r*37+salt)%200), Items: map[string]int{"salt": salt, "sq": r * r}}
}

// caseObjColl: GatherObj, AllgatherObj and ScatterObj against the values
// every rank can compute, at every root; a root with the wrong number of
// values and a value that cannot be encoded fail at every rank with
// ErrArg, and the communicator works afterwards.
func caseObjColl(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	for root := range n {
		got, err := mpi.GatherObj(w, mkItem(me, root), root)
		if err != nil {
			return err
		}
		if me != root && got != nil {
			return fmt.Errorf("GatherObj at a non-root rank: %v, want nil", got)
		}
		for r := 0; me == root && r < n; r++ {
			if want := mkItem(r, root); fmt.Sprint(got[r]) != fmt.Sprint(want) {
				return fmt.Errorf("GatherObj root %d: value of rank %d is %v, want %v", root, r, got[r], want)
			}
		}
		var vs []objItem
		if me == root {
			for r := range n {
				vs = append(vs, mkItem(r, 100+root))
			}
		}
		v, err := mpi.ScatterObj(w, vs, root)
		if err != nil {
			return err
		}
		if want := mkItem(me, 100+root); fmt.Sprint(v) != fmt.Sprint(want) {
			return fmt.Errorf("ScatterObj root %d: %v, want %v", root, v, want)
		}
	}
	all, err := mpi.AllgatherObj(w, []string{strings.Repeat("y", me), fmt.Sprint(me)})
	if err != nil {
		return err
	}
	for r := range n {
		if len(all) != n || len(all[r]) != 2 || all[r][0] != strings.Repeat("y", r) || all[r][1] != fmt.Sprint(r) {
			return fmt.Errorf("AllgatherObj: %q", all)
		}
	}
	// Bad input: root 0 has one value too few; rank 1 gives a channel.
	var vs []int
	if me == 0 {
		vs = make([]int, n-1)
	}
	if _, err := mpi.ScatterObj(w, vs, 0); !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("ScatterObj with %d values for %d ranks: %v, want ErrArg at every rank", n-1, n, err)
	}
	var bad any = me
	if me == 1 {
		bad = make(chan int)
	}
	if _, err := mpi.AllgatherObj(w, bad); !errors.Is(err, mpi.ErrArg) || !strings.Contains(err.Error(), "rank 1") && me != 1 {
		return fmt.Errorf("AllgatherObj with a channel at rank 1: %v, want ErrArg naming rank 1", err)
	}
	if _, err := mpi.GatherObj(w, bad, 0); (me == 0 || me == 1) != (err != nil) {
		return fmt.Errorf("GatherObj with a channel at rank 1: %v (want an error at ranks 0 and 1 only)", err)
	}
	x := []int{1}
	if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n {
		return fmt.Errorf("Allreduce after the failed calls: %v %v", x, err)
	}
	return nil
}

func TestObjColl(t *testing.T) { job{np: 3, cas: "objcoll"}.ok(t) }

func init() { rawCases["init-thread"] = caseInitThread }

// caseInitThread: QueryThread before Init fails with ErrNotInit; a level
// out of range fails with ErrArg and initializes nothing; InitThread
// provides ThreadMultiple, which QueryThread then reports.
func caseInitThread() int {
	fail := func(f string, a ...any) int { fmt.Fprintf(os.Stderr, "FAIL: "+f+"\n", a...); return 1 }
	if _, err := mpi.QueryThread(); !errors.Is(err, mpi.ErrNotInit) {
		return fail("QueryThread before Init: %v, want ErrNotInit", err)
	}
	if _, err := mpi.InitThread(mpi.ThreadLevel(7)); !errors.Is(err, mpi.ErrArg) || mpi.Initialized() {
		return fail("InitThread(7): %v (initialized %v), want ErrArg and nothing initialized", err, mpi.Initialized())
	}
	got, err := mpi.InitThread(mpi.ThreadFunneled)
	if err != nil || got != mpi.ThreadMultiple {
		return fail("InitThread(ThreadFunneled): %v %v, want ThreadMultiple", got, err)
	}
	if q, err := mpi.QueryThread(); q != mpi.ThreadMultiple || err != nil {
		return fail("QueryThread: %v %v", q, err)
	}
	if err := mpi.Finalize(); err != nil {
		return fail("Finalize: %v", err)
	}
	return 0
}

func TestInitThread(t *testing.T) { job{np: 2, cas: "init-thread"}.ok(t) }

func init() { rankCases["idup"] = caseIdup }

// caseIdup: Idup is nonblocking (rank 0 starts it, then Ssends to rank 1,
// which receives before its own Idup: a blocking Dup would deadlock),
// takes its place among the parent's collectives at the call (an
// Allreduce on the parent and a second Idup start before the first
// completes), and gives communicators with contexts of their own: a
// message on one is not received on the parent or the other.
func caseIdup(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	var a, b *mpi.Comm
	var qa, qb *mpi.Request
	var err error
	if me != 1 {
		if a, qa, err = w.Idup(); err != nil {
			return err
		}
	}
	switch me {
	case 0:
		if err := mpi.Ssend(w, []int{42}, 1, 3); err != nil {
			return err
		}
	case 1:
		x := []int{0}
		if _, err := mpi.Recv(w, x, 0, 3); err != nil || x[0] != 42 {
			return fmt.Errorf("Recv before Idup: %v %v", x, err)
		}
		if a, qa, err = w.Idup(); err != nil {
			return err
		}
	}
	x := []int{me}
	if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n*(n-1)/2 {
		return fmt.Errorf("Allreduce on the parent while Idup runs: %v %v", x, err)
	}
	if b, qb, err = w.Idup(); err != nil {
		return err
	}
	if _, err := mpi.Waitall([]*mpi.Request{qb, qa}); err != nil {
		return err
	}
	for _, c := range []*mpi.Comm{a, b} {
		if c.Size() != n || c.Rank() != me {
			return fmt.Errorf("Idup: size %d rank %d, want %d and %d", c.Size(), c.Rank(), n, me)
		}
		y := []int{me + 1}
		if err := mpi.Allreduce(c, y, y, mpi.Sum); err != nil || y[0] != n*(n+1)/2 {
			return fmt.Errorf("Allreduce on the duplicate: %v %v", y, err)
		}
	}
	// Contexts: rank 0 sends to rank 1 on a, then on b, then on w; rank 1
	// receives with AnyTag on w first: it must get w's message.
	if n >= 2 && me <= 1 {
		if me == 0 {
			for i, c := range []*mpi.Comm{a, b, w} {
				if err := mpi.Send(c, []int{i}, 1, 0); err != nil {
					return err
				}
			}
		} else {
			for _, c := range []*mpi.Comm{w, b, a} {
				y := []int{-1}
				if _, err := mpi.Recv(c, y, 0, mpi.AnyTag); err != nil {
					return err
				}
				want := map[*mpi.Comm]int{a: 0, b: 1, w: 2}[c]
				if y[0] != want {
					return fmt.Errorf("received %d on %s, want %d: contexts mixed", y[0], c.Name(), want)
				}
			}
		}
	}
	return nil
}

func TestIdup(t *testing.T) { job{np: 3, cas: "idup"}.ok(t) }
