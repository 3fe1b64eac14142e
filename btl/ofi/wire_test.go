package ofi

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gorun/gorun/btl"
)

func TestMsgRoundTrip(t *testing.T) {
	var h btl.Header
	for i := range h {
		h[i] = byte(i)
	}
	b := make([]byte, firstLen+5)
	putFirst(b, 3, 0xfeed, 7, 100, &h)
	copy(b[firstLen:], "hello")
	var m msg
	if err := decodeMsg(b, 4, &m); err != nil {
		t.Fatal(err)
	}
	if m.typ != tFirst || m.src != 3 || m.cookie != 0xfeed || m.seq != 7 || m.total != 100 || *m.hdr != h || string(m.data) != "hello" {
		t.Fatalf("decoded %+v", m)
	}
	bad := []struct {
		name string
		b    []byte
		size int
	}{
		{"short", b[:fixedLen-1], 4},
		{"rank outside the job", b, 3},
		{"first fragment without its header", b[:firstLen-1], 4},
		{"more data than the frame", append(b[:firstLen:firstLen], make([]byte, 101)...), 4},
	}
	for _, c := range bad {
		if err := decodeMsg(c.b, c.size, &m); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	p := make([]byte, fixedLen)
	putFixed(p, tProbe, 1, 1, 1)
	if err := decodeMsg(p, 2, &m); err != nil || m.typ != tProbe {
		t.Errorf("probe: %v %+v", err, m)
	}
	p[0] = numTypes
	if err := decodeMsg(p, 2, &m); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown type: %v", err)
	}
	p[0], p[21] = tProbe, 1
	if err := decodeMsg(p, 2, &m); !errors.Is(err, ErrMalformed) {
		t.Errorf("reserved byte: %v", err)
	}
}

func TestCardRoundTrip(t *testing.T) {
	c := card{prov: "tcp;ofi_rxm", fabric: "127.0.0.1/32", addr: []byte{2, 0, 1, 2, 127, 0, 0, 1}}
	got, err := decodeCard(c.encode())
	if err != nil || got.prov != c.prov || got.fabric != c.fabric || !bytes.Equal(got.addr, c.addr) {
		t.Fatalf("%+v %v", got, err)
	}
	enc := c.encode()
	for n := range len(enc) {
		if _, err := decodeCard(enc[:n]); !errors.Is(err, ErrBadCard) {
			t.Errorf("card cut to %d bytes: %v", n, err)
		}
	}
	if _, err := decodeCard(append(enc, 0)); !errors.Is(err, ErrBadCard) {
		t.Errorf("card with a trailing byte: %v", err)
	}
}

func TestJobCookie(t *testing.T) {
	a := jobCookie([]byte("secret"), "job1")
	if a == jobCookie([]byte("secret"), "job2") || a == jobCookie([]byte("other"), "job1") || a != jobCookie([]byte("secret"), "job1") {
		t.Fatal("the cookie does not depend on secret and job alone")
	}
}

// FuzzMsg: no peer's bytes make decodeMsg panic, and what it accepts
// stays inside the message.
func FuzzMsg(f *testing.F) {
	var h btl.Header
	b := make([]byte, firstLen+3)
	putFirst(b, 1, 9, 0, 3, &h)
	f.Add(b, 4)
	p := make([]byte, fixedLen+4)
	putFixed(p, tCont, 0, 9, 5)
	f.Add(p, 2)
	f.Add(card{prov: "x", fabric: "y", addr: []byte{1}}.encode(), 1)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		var m msg
		if err := decodeMsg(b, size, &m); err == nil {
			if m.src < 0 || m.src >= size || len(m.data) > len(b) {
				t.Fatalf("accepted %+v from %d bytes, size %d", m, len(b), size)
			}
			if m.typ == tFirst && uint64(len(m.data)) > m.total {
				t.Fatal("more data than the frame")
			}
		}
		if c, err := decodeCard(b); err == nil && !bytes.Equal(c.encode(), b) {
			t.Fatalf("card %x decodes to %+v, which encodes differently", b, c)
		}
	})
}
