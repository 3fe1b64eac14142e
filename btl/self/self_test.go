package self

import (
	"slices"
	"testing"

	"github.com/gorun/gorun/btl"
)

// plain records what the handler was given, in order: the first header
// byte of each frame and its payload.
type plain struct{ got []string }

func (p *plain) Begin(src int, h *btl.Header, n int) []byte { return make([]byte, n) }
func (p *plain) End(src int, h *btl.Header, d []byte)       { p.got = append(p.got, string(h[0])+string(d)) }
func (p *plain) PeerFailed(src int, err error)              {}
func (p *plain) log() []string                              { return p.got }

// whole is plain that also takes whole frames, which it marks "w".
type whole struct{ plain }

func (w *whole) Whole(src int, h *btl.Header, d []byte) bool {
	w.got = append(w.got, "w"+string(h[0])+string(d))
	return true
}

type nopDone struct{}

func (nopDone) FrameDone(*btl.Frame, error) {}

// TestSendNowKeepsOrder: SendNow delivers at once, through Whole where
// the handler has it, and refuses while a frame sent before it waits in
// the queue (it would overtake it).
func TestSendNowKeepsOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    interface {
			btl.Handler
			log() []string
		}
		now string // how SendNow's frame shows in the log
	}{
		{"Begin/End", &plain{}, "bB"},
		{"Whole", &whole{}, "wbB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod, err := component{}.Open(btl.Env{Rank: 0, Size: 1, Handler: tc.h})
			if err != nil {
				t.Fatal(err)
			}
			m := mod.(*module)
			var ep btl.Endpoint = m
			imm, ok := ep.(btl.Immediate)
			if !ok {
				t.Fatal("self's endpoint offers no immediate send")
			}
			f := &btl.Frame{Payload: []byte("A"), Owner: nopDone{}}
			f.Hdr[0] = 'a'
			if err := m.Send(f); err != nil {
				t.Fatal(err)
			}
			var h btl.Header
			h[0] = 'b'
			if imm.SendNow(&h, []byte("B")) {
				t.Fatalf("SendNow took a frame with one queued ahead of it; delivered %q", tc.h.log())
			}
			if n := m.Progress(); n != 1 {
				t.Fatalf("Progress delivered %d frames, want 1", n)
			}
			if !imm.SendNow(&h, []byte("B")) {
				t.Fatal("SendNow refused a frame with nothing queued")
			}
			if want := []string{"aA", tc.now}; !slices.Equal(tc.h.log(), want) {
				t.Fatalf("delivered %q, want %q", tc.h.log(), want)
			}
			m.Close()
			if imm.SendNow(&h, nil) {
				t.Fatal("SendNow took a frame after Close")
			}
		})
	}
}
