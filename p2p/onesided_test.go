package p2p

import (
	"bytes"
	"testing"

	"github.com/gorun/gorun/btl"
)

// TestOneSided: memory one rank exposes is written and read by the other
// with PutTo and GetFrom, with no call at the exposing rank, wherever the
// route has RMA (sm with single copy; none on tcp, and none to oneself,
// where For gives no region); a transfer outside the region is refused.
func TestOneSided(t *testing.T) {
	eachWorld(t, func(t *testing.T, w *world) {
		want, known := w.rma()
		if len(w.engs) == 1 {
			want, known = false, true // For gives no region to oneself
		}
		win := make([]byte, 3<<20)
		x := w.receiver().Expose(btl.HostMem(win))
		defer x.Close()
		wire, err := x.For(w.src())
		if err != nil {
			t.Fatalf("For: %v", err)
		}
		if known && (wire != nil) != want {
			t.Fatalf("region offered: %v, want %v", wire != nil, want)
		}
		if wire == nil {
			return
		}
		e := w.sender()
		rm, err := e.Reach(w.dst(), wire)
		if err != nil {
			t.Fatalf("Reach: %v", err)
		}
		if rm.Len() != len(win) {
			t.Fatalf("remote length %d, want %d", rm.Len(), len(win))
		}
		for i, n := range []int{1, 8, 4096, 1<<20 + 3} {
			data := pattern(i, n)
			off := len(win) - n - i
			r, err := e.PutTo(btl.HostMem(data), rm, off)
			if err != nil {
				t.Fatalf("PutTo %d bytes at %d: %v", n, off, err)
			}
			if _, err := r.Wait(); err != nil {
				t.Fatalf("PutTo %d bytes: %v", n, err)
			}
			e.Release(r)
			if !bytes.Equal(win[off:off+n], data) {
				t.Fatalf("PutTo %d bytes at %d: the exposed memory differs", n, off)
			}
			back := make([]byte, n)
			r, err = e.GetFrom(btl.HostMem(back), rm, off)
			if err != nil {
				t.Fatalf("GetFrom: %v", err)
			}
			if st, err := r.Wait(); err != nil || st.Bytes != n {
				t.Fatalf("GetFrom %d bytes: %+v, %v", n, st, err)
			}
			e.Release(r)
			if !bytes.Equal(back, data) {
				t.Fatalf("GetFrom %d bytes at %d: got other bytes", n, off)
			}
		}
		if _, err := e.PutTo(btl.HostMem(make([]byte, 2)), rm, len(win)-1); err == nil {
			t.Fatal("PutTo past the region's end: no error")
		}
		if _, err := e.GetFrom(btl.HostMem(make([]byte, 1)), rm, -1); err == nil {
			t.Fatal("GetFrom at a negative offset: no error")
		}
		if _, err := e.Reach(w.dst(), wire[:5]); err == nil {
			t.Fatal("Reach of a truncated region: no error")
		}
	})
}
