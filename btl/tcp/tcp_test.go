package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
)

// recorder is a btl.Handler that keeps what it receives.
type recorder struct {
	frames [][]byte
	failed []error
	ranks  []int // of the failures
}

func (r *recorder) Begin(src int, h *btl.Header, n int) []byte { return make([]byte, n) }
func (r *recorder) End(src int, h *btl.Header, d []byte)       { r.frames = append(r.frames, d) }
func (r *recorder) PeerFailed(src int, err error) {
	r.failed = append(r.failed, err)
	r.ranks = append(r.ranks, src)
}

type done struct{ n int }

func (d *done) FrameDone(f *btl.Frame, err error) { d.n++ }

func open(t *testing.T, rank int, secret []byte, h btl.Handler) *module {
	t.Helper()
	return openSized(t, rank, 2, secret, h)
}

// openSized opens rank of a job of size ranks.
func openSized(t *testing.T, rank, size int, secret []byte, h btl.Handler) *module {
	t.Helper()
	m, err := component{}.Open(btl.Env{Rank: rank, Size: size, Secret: secret, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.(*module)
}

// progressUntil polls m until cond holds or 5 s pass.
func progressUntil(m *module, cond func() bool) bool {
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		m.Progress()
		if cond() {
			return true
		}
		m.Wait(time.Millisecond)
	}
	return false
}

// expectClosed checks that module m hangs up on c.
func expectClosed(t *testing.T, m *module, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(m.connTimeout + 2*time.Second))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection not closed by the module: %v", err)
	}
	if len(b) > 32 {
		t.Fatalf("module sent %d bytes to an unauthenticated peer", len(b))
	}
}

func TestStrayConnectionsAreRejected(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	rec := &recorder{}
	a := open(t, 1, secret, rec)
	addr := string(a.Address())

	// Garbage instead of a handshake.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n" + string(bytes.Repeat([]byte{'x'}, 200))))
	expectClosed(t, a, c)

	// The right protocol with the wrong secret.
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := dialHandshake(c, deriveKey(bytes.Repeat([]byte{8}, 32)), 0, 1); err == nil {
		t.Fatal("handshake with a wrong secret succeeded")
	}
	c.Close()

	// A peer claiming a rank outside the job.
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := dialHandshake(c, deriveKey(secret), 5, 1); err == nil {
		t.Fatal("handshake claiming rank 5 of 2 succeeded")
	}
	c.Close()

	// Nothing of the above reached the handler.
	a.Progress()
	if len(rec.frames) != 0 || len(a.in) != 0 {
		t.Fatalf("rejected connections delivered %d frames, %d connections adopted", len(rec.frames), len(a.in))
	}

	// The real peer gets through, in both directions of use.
	b := open(t, 0, secret, &recorder{})
	ep, err := b.Reach(btl.Peer{Rank: 1, Addrs: map[string][]byte{"tcp": a.Address()}})
	if err != nil {
		t.Fatal(err)
	}
	d := &done{}
	f := &btl.Frame{Payload: []byte("hello"), Owner: d}
	if err := ep.Send(f); err != nil {
		t.Fatal(err)
	}
	if !progressUntil(a, func() bool { b.Progress(); return len(rec.frames) == 1 }) {
		t.Fatal("authenticated frame never arrived")
	}
	if string(rec.frames[0]) != "hello" || d.n != 1 {
		t.Fatalf("got %q, %d completions", rec.frames[0], d.n)
	}
}

func TestMalformedFrameClosesConnection(t *testing.T) {
	secret := bytes.Repeat([]byte{3}, 32)
	rec := &recorder{}
	a := open(t, 1, secret, rec)
	c, err := net.Dial("tcp", string(a.Address()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := dialHandshake(c, deriveKey(secret), 0, 1); err != nil {
		t.Fatal(err)
	}
	var hdr [wireHeader]byte
	binary.LittleEndian.PutUint64(hdr[:], 1<<60) // absurd length
	c.Write(hdr[:])
	if !progressUntil(a, func() bool { return len(rec.failed) == 1 }) {
		t.Fatal("malformed frame did not fail the peer")
	}
	if len(rec.frames) != 0 {
		t.Fatal("malformed frame was delivered")
	}
	expectClosed(t, a, c)
}
