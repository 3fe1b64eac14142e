package tcp

import (
	"bytes"
	"testing"

	"github.com/gorun/gorun/btl"
)

// TestMixedSizesKeepOrder streams frames whose sizes straddle directRead,
// tailRead and the staging buffer, so that payloads are split between reads
// into the destination and into the staging buffer, and checks every byte.
func TestMixedSizesKeepOrder(t *testing.T) {
	secret := []byte("mixed")
	rec := &recorder{}
	m0 := open(t, 0, secret, &recorder{})
	m1 := open(t, 1, secret, rec)
	ep, err := m0.Reach(btl.Peer{Rank: 1, Addrs: map[string][]byte{"tcp": m1.Address()}})
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{0, 1, directRead - 1, directRead, directRead + 1, 64 << 10, 7,
		tailRead - wireHeader, tailRead, 3 << 20, 100, rbufSize + 13, 64 << 10, 64 << 10, 1, 200 << 10, 5}
	var want [][]byte
	d := &done{}
	for i, n := range sizes {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(i*31 + j*7 + j>>9)
		}
		want = append(want, p)
		f := &btl.Frame{Payload: p, Owner: d}
		f.Hdr[0] = byte(i)
		if err := ep.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	ok := progressUntil(m1, func() bool {
		m0.Progress()
		return len(rec.frames) == len(sizes)
	})
	if !ok {
		t.Fatalf("got %d of %d frames, %d sent, failures %v", len(rec.frames), len(sizes), d.n, rec.failed)
	}
	for i := range want {
		if !bytes.Equal(rec.frames[i], want[i]) {
			t.Fatalf("frame %d (%d bytes): payload differs (got %d bytes)", i, len(want[i]), len(rec.frames[i]))
		}
	}
}
