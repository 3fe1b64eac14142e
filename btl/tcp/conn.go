package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

// wireHeader is the per-frame prefix: payload length, then the header.
const wireHeader = 8 + btl.HeaderSize

// maxPayload rejects frames claiming absurd lengths (a corrupt stream).
const maxPayload = 1 << 42

// rbufSize is the staging buffer of a receiving connection; payload beyond
// what it holds is read straight into the destination.
const rbufSize = 256 << 10

// tailRead is how much a read that completes a large payload, or follows
// one, takes into the staging buffer: enough for the next frame's header and
// some payload, little enough that the next large payload mostly lands in
// its destination instead of being copied out of the staging buffer.
const tailRead = 4096

// directRead is the remaining payload above which reads bypass the staging
// buffer and land in the destination.
const directRead = 32 << 10

// outConn is the sending side of the connection to one peer. Until the
// connection is ready (state stReady) frames wait in the queue while
// Progress connects it (connect.go).
type outConn struct {
	m     *module
	rank  int
	addr  string
	sa    unix.Sockaddr
	fd    int
	state connState
	hs    *dialState // set while connecting
	err   error
	queue []*btl.Frame
	off   int // bytes of queue[0] (wire header included) already written
	hbuf  [wireHeader]byte
	iov   [2]unix.Iovec
	// in is the receiving side of the same connection (fd is its fd),
	// once it is ready: either rank writes and reads the one connection
	// of the pair (doc.go).
	in *inConn
}

// Send writes f at once if the connection is ready and nothing is queued,
// and queues what is left. The first Send to a peer starts connecting and
// returns at once: nothing here waits on the network.
func (oc *outConn) Send(f *btl.Frame) error {
	if oc.err != nil {
		return oc.err
	}
	oc.queue = append(oc.queue, f)
	if len(oc.queue) > 1 {
		return nil // on the busy list already
	}
	oc.off = 0
	if oc.state == stReady {
		oc.flush()
		if len(oc.queue) > 0 && oc.err == nil {
			oc.m.busy = append(oc.m.busy, oc)
		}
		return nil
	}
	if oc.state == stIdle {
		oc.start()
	}
	oc.m.busy = append(oc.m.busy, oc)
	return nil
}

// flush writes queued frames until the socket would block; it returns the
// number of frames completed.
func (oc *outConn) flush() int {
	n := 0
	for len(oc.queue) > 0 {
		f := oc.queue[0]
		total := wireHeader + len(f.Payload)
		if oc.off == 0 {
			binary.LittleEndian.PutUint64(oc.hbuf[:8], uint64(len(f.Payload)))
			copy(oc.hbuf[8:], f.Hdr[:])
		}
		var w int
		var err error
		if oc.off < wireHeader {
			w, err = oc.send(oc.hbuf[oc.off:], f.Payload)
		} else {
			w, err = oc.send(f.Payload[oc.off-wireHeader:], nil)
		}
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				return n
			}
			oc.fail(fmt.Errorf("tcp: send to rank %d: %w", oc.rank, err))
			oc.m.peerFailed(oc.rank, oc.err)
			return n
		}
		oc.off += w
		if oc.off < total {
			continue
		}
		oc.queue[0] = nil
		oc.queue = oc.queue[1:]
		oc.off = 0
		f.Owner.FrameDone(f, nil)
		n++
	}
	oc.queue = oc.queue[:0]
	return n
}

// send writes a and b with one sendmsg, without blocking and without
// SIGPIPE, and without allocating (unix.SendmsgBuffers allocates per call).
func (oc *outConn) send(a, b []byte) (int, error) {
	n := 0
	for _, p := range [2][]byte{a, b} {
		if len(p) > 0 {
			oc.iov[n].Base = &p[0]
			oc.iov[n].SetLen(len(p))
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	msg := unix.Msghdr{Iov: &oc.iov[0]}
	msg.SetIovlen(n)
	// MSG_DONTWAIT: it cannot block, so an eager frame's goes past the Go
	// scheduler (entersyscall and exitsyscall), as rawRead does; a larger
	// one tells it, since copying up to a socket buffer's worth (and, on
	// loopback, the receiver's delivery) takes long enough that the
	// runtime should be free to hand this P to another goroutine.
	call := uintptr(unix.SYS_SENDMSG)
	raw := len(a)+len(b) <= eagerLimit
	var r uintptr
	var e unix.Errno
	if raw {
		r, _, e = unix.RawSyscall(call, uintptr(oc.fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
	} else {
		r, _, e = unix.Syscall(call, uintptr(oc.fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
	}
	oc.iov = [2]unix.Iovec{}
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// fail completes every queued frame with err and closes the connection
// for good, its receiving side too.
func (oc *outConn) fail(err error) {
	if oc.err == nil {
		oc.err = err
	}
	oc.state, oc.hs = stFailed, nil
	q := oc.queue
	oc.queue = nil
	for _, f := range q {
		f.Owner.FrameDone(f, err)
	}
	if ic := oc.in; ic != nil {
		oc.in, ic.out = nil, nil
		oc.m.drop(ic, err) // closes the fd
		oc.fd = -1
	} else if oc.fd >= 0 {
		unix.Close(oc.fd)
		oc.fd = -1
	}
}

// attach makes ic, a connection the peer dialed and this rank took, the
// one oc writes to as well. A dial of this rank's own still under way is
// closed: the peer, of a lower rank, refuses it. A peer given up on
// already (its connection's set-up timed out here) is only read.
func (oc *outConn) attach(ic *inConn) {
	if oc.state == stFailed || oc.in != nil {
		return
	}
	if oc.fd >= 0 {
		unix.Close(oc.fd)
	}
	oc.link(ic)
}

// ready makes the connection this rank dialed, which the peer took, the
// one it reads from that peer as well.
func (oc *outConn) ready() {
	ic := newInConn(oc.fd, oc.rank)
	oc.link(ic)
	oc.m.watch(ic)
}

// link makes oc and ic the two sides of ic's connection, ready.
func (oc *outConn) link(ic *inConn) {
	oc.fd, oc.in, ic.out = ic.fd, ic, oc
	oc.state, oc.hs, oc.off = stReady, nil, 0
}

// inConn is the receiving side of the connection with one peer.
type inConn struct {
	fd   int
	rank int
	out  *outConn // the sending side on the same fd, if any
	buf  []byte
	pos  int // next unparsed byte in buf
	end  int // end of valid bytes in buf
	// Payload state: inside a frame when dst != nil or need > 0.
	inFrame bool
	hdr     btl.Header
	dst     []byte
	got     int
	big     bool // the last frame had a large payload: read little into buf
	iov     [2]unix.Iovec
}

func newInConn(fd, rank int) *inConn {
	return &inConn{fd: fd, rank: rank, buf: make([]byte, rbufSize)}
}

var errPeerClosed = errors.New("connection closed by peer")

// errRefused: the handler refused a frame (btl.Handler.Begin).
var errRefused = errors.New("protocol error")

// poll reads what the socket holds and delivers complete frames.
func (ic *inConn) poll(h btl.Handler) (int, error) {
	n := 0
	for {
		// Deliver what is buffered.
		k, err := ic.parse(h)
		n += k
		if err != nil {
			return n, err
		}
		// Read more: straight into the destination when much is missing.
		if ic.inFrame && len(ic.dst)-ic.got >= directRead {
			// parse consumed the whole staging buffer; read the rest of
			// the payload and what follows it with one readv.
			rest := ic.dst[ic.got:]
			ic.pos, ic.end = 0, 0
			r, err := ic.readv(rest, ic.buf[:tailRead])
			if r <= 0 {
				return n, readErr(r, err)
			}
			if r <= len(rest) {
				ic.got += r
			} else {
				ic.got = len(ic.dst)
				ic.end = r - len(rest)
			}
			if ic.got == len(ic.dst) {
				ic.finish(h)
				n++
			}
			continue
		}
		if ic.pos == ic.end {
			ic.pos, ic.end = 0, 0
		} else if ic.end == len(ic.buf) || len(ic.buf)-ic.pos < wireHeader {
			ic.end = copy(ic.buf, ic.buf[ic.pos:ic.end])
			ic.pos = 0
		}
		p := ic.buf[ic.end:]
		if ic.big && len(p) > tailRead {
			p = p[:tailRead]
		}
		r, err := rawRead(ic.fd, p)
		if r <= 0 {
			return n, readErr(r, err)
		}
		ic.end += r
		if r < len(p) {
			// The socket is most likely drained: deliver, and leave the
			// read that would say EAGAIN out (the next Progress reads
			// what came meanwhile: epoll reports it).
			k, err := ic.parse(h)
			return n + k, err
		}
	}
}

// readv reads into a, then b, without blocking.
func (ic *inConn) readv(a, b []byte) (int, error) {
	ic.iov[0].Base = &a[0]
	ic.iov[0].SetLen(len(a))
	ic.iov[1].Base = &b[0]
	ic.iov[1].SetLen(len(b))
	r, _, e := unix.RawSyscall(unix.SYS_READV, uintptr(ic.fd), uintptr(unsafe.Pointer(&ic.iov[0])), 2)
	ic.iov = [2]unix.Iovec{}
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// rawRead reads from a non-blocking socket without telling the Go
// scheduler (the call cannot block, so the scheduler need not know).
func rawRead(fd int, p []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func readErr(r int, err error) error {
	if err == unix.EAGAIN || err == unix.EINTR {
		return nil
	}
	if r == 0 && err == nil {
		return errPeerClosed
	}
	return err
}

// parse consumes whole headers and payload bytes from the staging buffer.
func (ic *inConn) parse(h btl.Handler) (int, error) {
	n := 0
	for {
		if ic.inFrame {
			c := copy(ic.dst[ic.got:], ic.buf[ic.pos:ic.end])
			ic.pos += c
			ic.got += c
			if ic.got < len(ic.dst) {
				return n, nil
			}
			ic.finish(h)
			n++
			continue
		}
		if ic.end-ic.pos < wireHeader {
			return n, nil
		}
		plen := binary.LittleEndian.Uint64(ic.buf[ic.pos:])
		if plen > maxPayload {
			return n, fmt.Errorf("malformed frame: payload length %d: %w", plen, io.ErrUnexpectedEOF)
		}
		copy(ic.hdr[:], ic.buf[ic.pos+8:ic.pos+wireHeader])
		ic.pos += wireHeader
		ic.dst = h.Begin(ic.rank, &ic.hdr, int(plen))
		if len(ic.dst) != int(plen) {
			return n, fmt.Errorf("frame of %d bytes refused (%d bytes given): %w", plen, len(ic.dst), errRefused)
		}
		ic.got = 0
		ic.inFrame = true
		ic.big = plen >= directRead
	}
}

func (ic *inConn) finish(h btl.Handler) {
	d := ic.dst
	ic.dst, ic.inFrame, ic.got = nil, false, 0
	h.End(ic.rank, &ic.hdr, d)
}
