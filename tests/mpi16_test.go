package tests

import (
	"context"
	"errors"
	"fmt"
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
