package p2p

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/btl"
)

// TestMatchedProbe: Mprobe takes the oldest matching message out of
// matching (no probe or receive sees it afterwards, the next one is seen
// instead) and Mrecv receives exactly it, eager and rendezvous sizes
// alike, including into a buffer too small (ErrTruncate); a Message is
// received once.
func TestMatchedProbe(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		sizes := []int{3, w.eager + 5, 0, splitMin + 1, 40}
		var msgs []msg
		for i, n := range sizes {
			msgs = append(msgs, msg{ctx: 1, tag: 5, data: pattern(i+1, n)})
		}
		src := w.src()
		w.within(t, func() {
			sendAll(t, w.sender(), w.dst(), msgs)
		}, func() {
			e := w.receiver()
			for i, m := range msgs {
				msg, err := e.Mprobe(1, AnySource, AnyTag)
				if err != nil {
					t.Errorf("mprobe %d: %v", i, err)
					return
				}
				if st := msg.Status(); st != (Status{Source: src, Tag: 5, Bytes: len(m.data)}) {
					t.Errorf("mprobe %d: status %+v, want %d bytes from %d", i, st, len(m.data), src)
				}
				if i+1 < len(msgs) {
					// The next message is what a plain probe sees now.
					st, err := e.Probe(1, AnySource, AnyTag)
					if err != nil || st.Bytes != len(msgs[i+1].data) {
						t.Errorf("probe after mprobe %d: %+v %v, want message %d (%d bytes)", i, st, err, i+1, len(msgs[i+1].data))
					}
				}
				buf := make([]byte, len(m.data))
				if i == 1 {
					buf = buf[:len(m.data)-1] // too small by one
				}
				r, err := e.Mrecv(msg, btl.HostMem(buf))
				if err != nil {
					t.Errorf("mrecv %d: %v", i, err)
					return
				}
				st, err := r.Wait()
				if i == 1 {
					if !errors.Is(err, ErrTruncate) || st.Bytes != len(buf) || sameBytes(buf, m.data[:len(buf)]) != "" {
						t.Errorf("mrecv %d into a short buffer: %+v %v, want ErrTruncate and the first %d bytes", i, st, err, len(buf))
					}
				} else {
					checkRecv(t, fmt.Sprintf("mrecv %d", i), st, err, buf, src, 5, m.data)
				}
				if _, err := e.Mrecv(msg, btl.HostMem(buf)); !errors.Is(err, ErrMessageUsed) {
					t.Errorf("second mrecv of message %d: %v, want ErrMessageUsed", i, err)
				}
			}
			if m, err := e.Improbe(1, AnySource, AnyTag); m != nil || err != nil {
				t.Errorf("improbe with nothing left: %+v %v", m, err)
			}
		})
	})
}

// TestCancelRecv: a posted receive that nothing matched is withdrawn: it
// completes with ErrCancelled and the message sent afterwards goes to the
// next receive, not to the cancelled one; a receive that has matched
// cannot be cancelled and completes normally.
func TestCancelRecv(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		data := pattern(3, w.eager+9)
		ready := make(chan struct{})
		w.within(t, func() {
			<-ready
			sendAll(t, w.sender(), w.dst(), []msg{{ctx: 1, tag: 2, data: data}})
		}, func() {
			e := w.receiver()
			dead := make([]byte, len(data))
			r, err := e.Irecv(1, AnySource, 2, dead)
			if err != nil {
				t.Errorf("irecv: %v", err)
				return
			}
			if !e.CancelRecv(r) {
				t.Errorf("cancel of an unmatched receive: false")
			}
			if _, err := r.Wait(); !errors.Is(err, ErrCancelled) {
				t.Errorf("cancelled receive: %v, want ErrCancelled", err)
			}
			if e.CancelRecv(r) {
				t.Errorf("second cancel: true")
			}
			close(ready)
			buf := make([]byte, len(data))
			r2, err := e.Irecv(1, AnySource, 2, buf)
			if err != nil {
				t.Errorf("irecv: %v", err)
				return
			}
			st, err := r2.Wait()
			checkRecv(t, "receive after the cancelled one", st, err, buf, w.src(), 2, data)
			if e.CancelRecv(r2) {
				t.Errorf("cancel of a completed receive: true")
			}
			if sameBytes(dead, make([]byte, len(data))) != "" {
				t.Errorf("the cancelled receive's buffer was written")
			}
		})
	})
}
