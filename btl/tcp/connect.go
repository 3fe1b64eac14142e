package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// connState is where an outbound connection stands. Send on a connection
// that is not stReady queues the frame and returns; Progress moves the
// connection along these states without blocking (doc.go, "Connecting"):
//
//	stIdle --Send--> stConnecting --POLLOUT, SO_ERROR 0--> stChallenge
//	--32 bytes read--> stProof --80 bytes written--> stReply
//	--32 bytes read, HMAC good: taken--> stReady
//	                            refused--> stAwait --the peer's connection--> stReady
//	stIdle --Send, the peer's dial taken already--> stAwait
//
// and from any state before stReady to stFailed on an error, on the peer
// closing, or when the module's connect timeout passes. Any state but
// stFailed goes to stReady when the peer's dial is taken (attach).
type connState uint8

const (
	stIdle       connState = iota // nothing sent yet: no socket
	stConnecting                  // non-blocking connect in flight
	stChallenge                   // reading the acceptor's nonce
	stProof                       // writing the dialer's message
	stReply                       // reading the acceptor's HMAC
	stAwait                       // waiting for the peer's connection (no socket)
	stReady                       // authenticated: frames flow
	stFailed                      // oc.err says why
)

// phase names what a connection in state s waits for, for errors.
func (s connState) phase() string {
	switch s {
	case stConnecting:
		return "connect not answered"
	case stChallenge:
		return "no challenge from the peer"
	case stProof:
		return "proof not taken by the peer"
	case stReply:
		return "no reply to our proof"
	case stAwait:
		return "the peer did not connect"
	}
	return "not connected"
}

// dialState is what an outbound connection carries until it is ready.
type dialState struct {
	start  time.Time
	err    error // a failure of the connect's start, reported by Progress
	nonceA [nonceSize]byte
	nonceD [nonceSize]byte
	reply  [macSize]byte
	buf    []byte // the message being read or written
	n      int    // bytes of buf done
}

// sockaddr parses a published address ("ip:port"; no names: resolving one
// could wait on the network).
func sockaddr(s string) (unix.Sockaddr, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, err
	}
	ip := ap.Addr()
	if ip.Is4() || ip.Is4In6() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.Unmap().As4()}, nil
	}
	sa := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}
	if z := ip.Zone(); z != "" {
		if i, err := strconv.Atoi(z); err == nil {
			sa.ZoneId = uint32(i)
		} else if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		} else {
			return nil, err
		}
	}
	return sa, nil
}

// start opens a non-blocking socket and starts connecting it, unless the
// peer's dial was taken already (then the connection is on its way to
// Progress: stAwait). A failure is kept for Progress to report, so that
// Send's caller sees one path.
func (oc *outConn) start() {
	oc.hs = &dialState{start: time.Now()}
	if !oc.m.dialOrWait(oc.rank) {
		oc.state = stAwait
		return
	}
	oc.state = stConnecting
	fam := unix.AF_INET
	if _, ok := oc.sa.(*unix.SockaddrInet6); ok {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		oc.hs.err = oc.errorf("connect to", err)
		return
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	switch err := unix.Connect(fd, oc.sa); err {
	case nil, unix.EINPROGRESS, unix.EINTR: // EINTR: the connect goes on
		oc.fd = fd
	default:
		unix.Close(fd)
		oc.hs.err = oc.errorf("connect to", err)
	}
}

func (oc *outConn) errorf(op string, err error) error {
	return fmt.Errorf("tcp: %s rank %d at %s: %w", op, oc.rank, oc.addr, err)
}

// advance drives a connection that is not ready as far as it goes
// without blocking, and flushes the queue once it is. It returns the
// number of frames completed, failed ones included.
func (oc *outConn) advance() int {
	hs := oc.hs
	if hs.err != nil {
		return oc.connectFailed(hs.err)
	}
	for {
		switch oc.state {
		case stConnecting:
			ok, err := connectDone(oc.fd)
			if err != nil {
				return oc.connectFailed(oc.errorf("connect to", err))
			}
			if !ok {
				return oc.checkDeadline()
			}
			oc.state, hs.buf, hs.n = stChallenge, hs.nonceA[:], 0
		case stChallenge, stReply:
			r, err := rawRead(oc.fd, hs.buf[hs.n:])
			if r <= 0 {
				if err = readErr(r, err); err == nil {
					return oc.checkDeadline()
				}
				return oc.connectFailed(oc.errorf("handshake with", fmt.Errorf("%s: %w (did the peer reject us?)", oc.state.phase(), err)))
			}
			hs.n += r
			if hs.n < len(hs.buf) {
				continue
			}
			if oc.state == stChallenge {
				rand.Read(hs.nonceD[:])
				oc.state = stProof
				hs.buf, hs.n = dialMsg(oc.m.key, hs.nonceA[:], hs.nonceD[:], oc.m.env.Rank, oc.rank), 0
				continue
			}
			rb, db := u32(oc.m.env.Rank), u32(oc.rank)
			if hmac.Equal(hs.buf, acceptMAC(oc.m.key, hs.nonceD[:], hs.nonceA[:], rb, db, true)) {
				oc.ready()
				return oc.flush()
			}
			if oc.rank < oc.m.env.Rank && hmac.Equal(hs.buf, acceptMAC(oc.m.key, hs.nonceD[:], hs.nonceA[:], rb, db, false)) {
				// The peer dialed this rank too, and its dial wins:
				// its connection is on its way (attach).
				unix.Close(oc.fd)
				oc.fd, oc.state = -1, stAwait
				continue
			}
			return oc.connectFailed(oc.errorf("handshake with", fmt.Errorf("peer's reply: %w", errAuth)))
		case stAwait:
			return oc.checkDeadline()
		case stProof:
			w, err := oc.send(hs.buf[hs.n:], nil)
			if err == unix.EAGAIN || err == unix.EINTR {
				return oc.checkDeadline()
			}
			if err != nil {
				return oc.connectFailed(oc.errorf("handshake with", fmt.Errorf("send proof: %w", err)))
			}
			hs.n += w
			if hs.n == len(hs.buf) {
				oc.state, hs.buf, hs.n = stReply, hs.reply[:], 0
			}
		default:
			panic("tcp: advance in state " + strconv.Itoa(int(oc.state)))
		}
	}
}

// connectDone reports whether the non-blocking connect on fd has ended,
// and its error.
func connectDone(fd int) (bool, error) {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(pfd[:], 0)
	if err == unix.EINTR || n == 0 {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return false, err
	}
	if v != 0 {
		return false, unix.Errno(v)
	}
	return true, nil
}

// checkDeadline fails the connection when it has been setting up for
// longer than the module's connect timeout; it returns the frames failed.
func (oc *outConn) checkDeadline() int {
	d := oc.m.connTimeout
	if time.Since(oc.hs.start) < d {
		return 0
	}
	return oc.connectFailed(oc.errorf("connect to", fmt.Errorf("%s within %v (GORUN_TCP_CONNECT_TIMEOUT): %w", oc.state.phase(), d, os.ErrDeadlineExceeded)))
}

// connectFailed fails the queued frames with err, closes the socket and
// reports the peer failed. It returns the number of frames failed.
func (oc *outConn) connectFailed(err error) int {
	n := len(oc.queue)
	oc.fail(err)
	oc.m.peerFailed(oc.rank, err)
	return n
}
