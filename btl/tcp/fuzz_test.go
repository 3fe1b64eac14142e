package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

// Fuzz targets for every decoder of a peer's bytes in btl/tcp: the
// acceptor's side of the handshake (the dialer's message), the frame
// stream of an authenticated connection, and the address a peer publishes
// in its business card. CI runs each for a few seconds (.ci/run).

// socketPair returns the two ends of a connected AF_UNIX stream socket
// pair: a stream socket like TCP's, without a port per iteration.
func socketPair(t *testing.T) (int, int) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fds[0], fds[1]
}

// fileConn makes fd a net.Conn (fd is taken).
func fileConn(t *testing.T, fd int) net.Conn {
	f := os.NewFile(uintptr(fd), "fuzz")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzHandshake plays a dialer that sends any message (sign: with its
// HMAC made right, so that the checks behind it are reached) to the
// acceptor's side of the handshake, over a real socket, and then hangs
// up. The acceptor must return at once, and name a rank only for a
// message with the right magic, proof and destination from a rank of the
// job.
func FuzzHandshake(f *testing.F) {
	key := deriveKey([]byte("fuzz"))
	const self, size = 1, 4
	nonceD := bytes.Repeat([]byte{0x5a}, nonceSize)
	// Seeds: dialMsg's own messages (sign makes their HMAC right against
	// the acceptor's fresh nonce), a foreign rank, a wrong destination,
	// and a short message.
	f.Add(dialMsg(key, make([]byte, nonceSize), nonceD, 0, self), true)
	f.Add(dialMsg(key, make([]byte, nonceSize), nonceD, 3, self), true)
	f.Add(dialMsg(key, make([]byte, nonceSize), nonceD, 4, self), true)
	f.Add(dialMsg(key, make([]byte, nonceSize), nonceD, -1, self), true)
	f.Add(dialMsg(key, make([]byte, nonceSize), nonceD, 0, 2), true)
	f.Add(dialMsg(key, make([]byte, nonceSize), nonceD, 0, self), false)
	f.Add(magic[:], false)
	f.Fuzz(func(t *testing.T, msg []byte, sign bool) {
		a, d := socketPair(t)
		ac, dc := fileConn(t, a), fileConn(t, d)
		defer dc.Close()
		type result struct {
			rank int
			err  error
		}
		res := make(chan result, 1)
		go func() {
			r, _, err := acceptHandshake(ac, key, self, size, 10*time.Second, nil)
			ac.Close()
			res <- result{r, err}
		}()
		nonceA := make([]byte, nonceSize)
		if _, err := readFull(dc, nonceA); err != nil {
			t.Fatalf("no challenge: %v", err)
		}
		valid := false
		if len(msg) >= dialMsgSize {
			msg = msg[:dialMsgSize]
			if sign {
				msg = append([]byte(nil), msg...)
				copy(msg[48:], mac(key, []byte("dial"), nonceA, msg[8:12], msg[12:16], msg[16:48]))
			}
			rank := binary.LittleEndian.Uint32(msg[8:])
			dest := binary.LittleEndian.Uint32(msg[12:])
			valid = [8]byte(msg[:8]) == magic && sign && rank < size && dest == self
		}
		dc.Write(msg)
		dc.(*net.UnixConn).CloseWrite()
		r := <-res
		switch {
		case r.err == nil && !valid:
			t.Fatalf("message %x accepted as rank %d", msg, r.rank)
		case r.err != nil && valid:
			t.Fatalf("valid message %x refused: %v", msg, r.err)
		case r.err == nil && int(binary.LittleEndian.Uint32(msg[8:])) != r.rank:
			t.Fatalf("message %x from rank %d accepted as rank %d", msg, binary.LittleEndian.Uint32(msg[8:]), r.rank)
		case r.err != nil && r.rank != -1:
			t.Fatalf("refused with rank %d: %v", r.rank, r.err)
		}
		if valid {
			reply := make([]byte, macSize)
			if _, err := readFull(dc, reply); err != nil || !bytes.Equal(reply, acceptMAC(key, msg[16:48], nonceA, msg[8:12], msg[12:16], true)) {
				t.Fatalf("reply %x, %v", reply, err)
			}
		}
	})
}

func readFull(c net.Conn, b []byte) (int, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// checker is a btl.Handler that keeps each frame and refuses (returns
// nil for) a payload longer than limit, as p2p refuses one it cannot
// place (btl.Handler).
type checker struct {
	limit  int
	frames []frame
	failed error
}

type frame struct {
	hdr     btl.Header
	payload []byte
}

func (c *checker) Begin(src int, h *btl.Header, n int) []byte {
	if n > c.limit {
		return nil
	}
	return make([]byte, n)
}

func (c *checker) End(src int, h *btl.Header, d []byte) {
	c.frames = append(c.frames, frame{*h, d})
}

func (c *checker) PeerFailed(src int, err error) { c.failed = err }

// parseStream is the reference for the frame stream: the frames that b
// holds whole, and whether b ends exactly after the last one.
func parseStream(b []byte) (frames []frame, clean bool) {
	for len(b) >= wireHeader {
		n := binary.LittleEndian.Uint64(b)
		if n > uint64(len(b)-wireHeader) {
			return frames, false
		}
		var f frame
		copy(f.hdr[:], b[8:wireHeader])
		f.payload = b[wireHeader : wireHeader+int(n)]
		frames = append(frames, f)
		b = b[wireHeader+int(n):]
	}
	return frames, len(b) == 0
}

// FuzzStream writes any bytes, in pieces of any size, into an
// authenticated connection's socket, polls the receiving side
// (inConn.poll) between pieces, hangs up and polls until the connection
// fails. Every frame the bytes hold whole must be delivered, in order, with
// its header and payload; nothing else; and the connection must end with
// an error (the hang-up, or a malformed or refused frame), never a panic.
func FuzzStream(f *testing.F) {
	enc := func(hdr byte, payload []byte) []byte {
		b := make([]byte, wireHeader, wireHeader+len(payload))
		binary.LittleEndian.PutUint64(b, uint64(len(payload)))
		b[8] = hdr
		return append(b, payload...)
	}
	two := append(enc(1, []byte("hello")), enc(2, bytes.Repeat([]byte{7}, 300))...)
	f.Add(two, uint16(0))
	f.Add(two, uint16(7))
	f.Add(append(enc(3, nil), enc(4, make([]byte, 5000))...), uint16(100))
	absurd := enc(5, nil)
	binary.LittleEndian.PutUint64(absurd, 1<<60)
	f.Add(absurd, uint16(0))
	long := enc(6, nil)
	binary.LittleEndian.PutUint64(long, 1<<40) // refused by the handler
	f.Add(long, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, piece uint16) {
		r, w := socketPair(t)
		defer unix.Close(w)
		if err := unix.SetNonblock(r, true); err != nil {
			t.Fatal(err)
		}
		ic := newInConn(r, 3)
		defer unix.Close(r)
		h := &checker{limit: len(b)}
		var err error
		poll := func() bool {
			_, err = ic.poll(h)
			return err != nil
		}
		step := int(piece)
		if step == 0 {
			step = len(b)
		}
		if err := unix.SetNonblock(w, true); err != nil {
			t.Fatal(err)
		}
		for rest := b; len(rest) > 0 && err == nil; {
			k, werr := unix.Write(w, rest[:min(step, len(rest))])
			switch {
			case werr == nil:
				rest = rest[k:]
			case werr != unix.EAGAIN && werr != unix.EINTR:
				t.Fatal(werr)
			}
			poll() // also what makes room when the socket is full
		}
		unix.Shutdown(w, unix.SHUT_WR)
		for err == nil {
			poll()
		}
		want, clean := parseStream(b)
		if len(h.frames) > len(want) {
			t.Fatalf("%d frames delivered, the stream holds %d", len(h.frames), len(want))
		}
		for i, f := range h.frames {
			if f.hdr != want[i].hdr || !bytes.Equal(f.payload, want[i].payload) {
				t.Fatalf("frame %d: got header %x, %d bytes; want %x, %d bytes", i, f.hdr[:8], len(f.payload), want[i].hdr[:8], len(want[i].payload))
			}
		}
		if len(h.frames) < len(want) {
			t.Fatalf("%d of the %d whole frames delivered before %v", len(h.frames), len(want), err)
		}
		if clean && !errors.Is(err, errPeerClosed) {
			t.Fatalf("a stream of whole frames ended with %v, want %v", err, errPeerClosed)
		}
	})
}

// FuzzSockaddr: a published address either parses into a socket address
// of the family it names, with its port, or is refused; it never panics
// and never resolves a name.
func FuzzSockaddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1:4242", "[::1]:1", "[fe80::1%1]:80", "[fe80::1%lo]:80", "[::ffff:10.0.0.1]:9", "host:80", ":80", "[fe80::1%nosuchif0]:80", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sa, err := sockaddr(s)
		if err != nil {
			return
		}
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			if a.Port < 0 || a.Port > 65535 {
				t.Fatalf("%q: port %d", s, a.Port)
			}
		case *unix.SockaddrInet6:
			if a.Port < 0 || a.Port > 65535 {
				t.Fatalf("%q: port %d", s, a.Port)
			}
		default:
			t.Fatalf("%q: %T", s, sa)
		}
	})
}
