package tcp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gorun/gorun/btl"
)

// bySource is a btl.Handler that keeps each source's frames in order.
type bySource struct {
	frames map[int][][]byte
	failed map[int]error
}

func (b *bySource) Begin(src int, h *btl.Header, n int) []byte { return make([]byte, n) }
func (b *bySource) End(src int, h *btl.Header, d []byte)       { b.frames[src] = append(b.frames[src], d) }
func (b *bySource) PeerFailed(src int, err error)              { b.failed[src] = err }

// TestManyPeers: a rank that receives from more peers than readAll reads
// the connections epoll reports ready. Five peers send interleaved frames
// (small ones, several to a read, and one larger than the staging buffer,
// read straight into its destination) and each peer's arrive whole and in
// order; then one peer closes its transport and only it is reported
// failed, the others' frames still arriving.
func TestManyPeers(t *testing.T) {
	const peers = 5
	secret := bytes.Repeat([]byte{9}, 32)
	rec := &bySource{frames: map[int][][]byte{}, failed: map[int]error{}}
	a := openSized(t, 0, peers+1, secret, rec)
	if a.ep < 0 {
		t.Fatal("no epoll instance")
	}
	mods := make([]*module, peers+1)
	eps := make([]btl.Endpoint, peers+1)
	for r := 1; r <= peers; r++ {
		mods[r] = openSized(t, r, peers+1, secret, &bySource{frames: map[int][][]byte{}, failed: map[int]error{}})
		ep, err := mods[r].Reach(btl.Peer{Rank: 0, Addrs: map[string][]byte{"tcp": a.Address()}})
		if err != nil {
			t.Fatal(err)
		}
		eps[r] = ep
	}
	payload := func(r, i int) []byte {
		n := 1 + (r*37+i*11)%300
		if i == 7 {
			n = rbufSize + 12345 // past the staging buffer
		}
		b := bytes.Repeat([]byte{byte(r)}, n)
		copy(b, fmt.Sprintf("%d:%d", r, i))
		return b
	}
	d := &done{}
	send := func(from, to int) {
		for i := from; i < to; i++ {
			for r := 1; r <= peers; r++ {
				if mods[r] == nil {
					continue
				}
				if err := eps[r].Send(&btl.Frame{Payload: payload(r, i), Owner: d}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	progress := func() {
		for _, m := range mods[1:] {
			if m != nil {
				m.Progress()
			}
		}
	}
	got := func(want int, live []int) func() bool {
		return func() bool {
			progress()
			for _, r := range live {
				if len(rec.frames[r]) < want {
					return false
				}
			}
			return true
		}
	}
	all := []int{1, 2, 3, 4, 5}
	send(0, 20)
	if !progressUntil(a, got(20, all)) {
		t.Fatalf("frames received by source: %v of 20 each", counts(rec, all))
	}
	if len(a.in) <= readAll {
		t.Fatalf("%d connections: the test reads them without epoll", len(a.in))
	}
	mods[3].Close()
	mods[3] = nil
	send(20, 40)
	live := []int{1, 2, 4, 5}
	if !progressUntil(a, func() bool { return got(40, live)() && rec.failed[3] != nil }) {
		t.Fatalf("frames received by source: %v of 40 each; failed: %v", counts(rec, live), rec.failed)
	}
	if a.ep < 0 {
		t.Fatal("the epoll instance was given up: the connections were read without it")
	}
	if len(rec.failed) != 1 || len(a.in) != peers-1 {
		t.Fatalf("failed peers %v, %d connections left, want rank 3 alone and %d", rec.failed, len(a.in), peers-1)
	}
	for _, r := range live {
		for i, f := range rec.frames[r] {
			if !bytes.Equal(f, payload(r, i)) {
				t.Fatalf("frame %d from rank %d: %d bytes starting %q, want %q", i, r, len(f), f[:min(8, len(f))], payload(r, i)[:8])
			}
		}
	}
	for i, f := range rec.frames[3] {
		if !bytes.Equal(f, payload(3, i)) {
			t.Fatalf("frame %d from rank 3 (before it closed): %q", i, f[:min(8, len(f))])
		}
	}
}

func counts(rec *bySource, ranks []int) map[int]int {
	c := map[int]int{}
	for _, r := range ranks {
		c[r] = len(rec.frames[r])
	}
	return c
}
