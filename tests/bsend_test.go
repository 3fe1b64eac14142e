package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["bsend"] = caseBsend }

// caseBsend (issue 16): buffered sends return once copied (the source may
// change at once), fail with ErrBuffer when the attached buffer has no
// room (or none is attached) and send nothing then, give their space back
// once delivered (the same buffer takes more after BufferDetach), and are delivered by BufferDetach and by Finalize; ready
// sends are standard sends.
func caseBsend(w *mpi.Comm) error {
	const n = 8192 // 64 KiB of float64: rendezvous, so undelivered until rank 1 receives
	me := w.Rank()
	msg := func(k int) []float64 {
		b := make([]float64, n)
		for i := range b {
			b[i] = float64(k*n + i)
		}
		return b
	}
	if me == 0 {
		if err := mpi.Bsend(w, []float64{1}, 1, 9); !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("Bsend without a buffer: %v, want ErrBuffer", err)
		}
		if _, err := mpi.BufferDetach(); !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("BufferDetach without a buffer: %v, want ErrBuffer", err)
		}
		buf := make([]byte, 3*(n*8+mpi.BsendOverhead))
		if err := mpi.BufferAttach(buf); err != nil {
			return err
		}
		if err := mpi.BufferAttach(make([]byte, 10)); !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("a second BufferAttach: %v, want ErrBuffer", err)
		}
		for k := 0; k < 3; k++ {
			src := msg(k)
			if err := mpi.Bsend(w, src, 1, k); err != nil {
				return fmt.Errorf("Bsend %d: %v", k, err)
			}
			clear(src) // copied already: the receiver must see the original
		}
		// More than the whole buffer never fits. (Whether the three
		// above still take their space depends on the transport: over
		// tcp a 64 KiB send may complete once in the socket.)
		if err := mpi.Bsend(w, make([]float64, 4*n), 1, 3); !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("Bsend of more than the buffer: %v, want ErrBuffer", err)
		}
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	if me == 1 {
		for k := 0; k < 3; k++ {
			got := make([]float64, n)
			if _, err := mpi.Recv(w, got, 0, k); err != nil {
				return err
			}
			for i, v := range got {
				if v != float64(k*n+i) {
					return fmt.Errorf("buffered message %d: element %d is %v, want %v", k, i, v, float64(k*n+i))
				}
			}
		}
	}
	if me == 0 {
		b, err := mpi.BufferDetach()
		if err != nil || len(b) != 3*(n*8+mpi.BsendOverhead) {
			return fmt.Errorf("BufferDetach: %d bytes, %v", len(b), err)
		}
		// Space comes back: the same buffer takes three more, one by
		// Ibsend (complete at once), and Finalize delivers the last.
		if err := mpi.BufferAttach(b); err != nil {
			return err
		}
		q, err := mpi.Ibsend(w, msg(4), 1, 4)
		if err != nil {
			return err
		}
		if ok, _, err := q.Test(); !ok || err != nil {
			return fmt.Errorf("Ibsend's request: complete %v, %v; want complete", ok, err)
		}
		if err := mpi.Bsend(w, msg(5), 1, 5); err != nil {
			return err
		}
	}
	// Ready mode: the receives are posted before the barrier (Rsend;
	// Irsend small, as Isend sends at once, and large, with a request of
	// its own).
	if me == 1 {
		got := make([]int, 1)
		r, err := mpi.Irecv(w, got, 0, 6)
		if err != nil {
			return err
		}
		small, large := make([]int, 1), make([]float64, 1<<16)
		rs, err := mpi.Irecv(w, small, 0, 7)
		if err != nil {
			return err
		}
		rl, err := mpi.Irecv(w, large, 0, 8)
		if err != nil {
			return err
		}
		if err := mpi.Barrier(w); err != nil {
			return err
		}
		if _, err := r.Wait(); err != nil || got[0] != 66 {
			return fmt.Errorf("ready send: got %v, %v", got, err)
		}
		if _, err := rs.Wait(); err != nil || small[0] != 77 {
			return fmt.Errorf("small Irsend: got %v, %v", small, err)
		}
		if _, err := rl.Wait(); err != nil || large[0] != 8 || large[len(large)-1] != float64(len(large)-1) {
			return fmt.Errorf("large Irsend: got %v ... %v, %v", large[0], large[len(large)-1], err)
		}
		for k := 4; k <= 5; k++ {
			got := make([]float64, n)
			if _, err := mpi.Recv(w, got, 0, k); err != nil || got[n-1] != float64(k*n+n-1) {
				return fmt.Errorf("buffered message %d: last element %v, %v", k, got[n-1], err)
			}
		}
		return nil
	}
	if err := mpi.Barrier(w); err != nil {
		return err
	}
	if me == 0 {
		if err := mpi.Rsend(w, []int{66}, 1, 6); err != nil {
			return err
		}
		large := make([]float64, 1<<16)
		for i := range large {
			large[i] = float64(i)
		}
		large[0] = 8
		qs, err := mpi.Irsend(w, []int{77}, 1, 7)
		if err != nil {
			return err
		}
		ql, err := mpi.Irsend(w, large, 1, 8)
		if err != nil {
			return err
		}
		return mpi.WaitallFree([]*mpi.Request{qs, ql})
	}
	return nil
}

// TestBsend: buffered and ready sends over shared memory and over TCP.
func TestBsend(t *testing.T) {
	job{np: 2, cas: "bsend"}.ok(t)
	job{np: 3, cas: "bsend", env: []string{"GORUN_BTL=tcp,self"}}.ok(t)
}
