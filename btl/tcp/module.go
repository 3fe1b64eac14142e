package tcp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

func init() { btl.Register("tcp", component{}) }

type component struct{}

// eagerLimit is TCP's eager/rendezvous switch: 64 KiB, Open MPI's own
// btl_tcp_eager_limit, where one extra round trip stops mattering against
// the copy.
const eagerLimit = 64 << 10

func (component) Open(env btl.Env) (btl.Module, error) {
	host := env.BindAddr
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", host, err)
	}
	m := &module{
		env:         env,
		key:         deriveKey(env.Secret),
		ln:          ln,
		out:         make(map[int]*outConn),
		failed:      make(map[int]bool),
		addr:        []byte(ln.Addr().String()),
		connTimeout: connectTimeout(),
		byFD:        make(map[int32]*inConn),
		claims:      make(map[int]claim),
	}
	// Without an epoll instance (or once adding a connection to it
	// failed) Progress reads every connection, as it did before.
	if m.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		m.ep = -1
	}
	go m.acceptLoop()
	return m, nil
}

type module struct {
	env  btl.Env
	key  []byte
	ln   net.Listener
	addr []byte
	// connTimeout bounds a connection's set-up on either side
	// (GORUN_TCP_CONNECT_TIMEOUT).
	connTimeout time.Duration

	// Accepted connections wait in pending until Progress adopts them.
	// claims: how the connection to each peer was settled (doc.go, "One
	// connection a pair"); under mu, since the acceptor's goroutines
	// decide too.
	mu       sync.Mutex
	pending  []*inConn
	npending atomic.Int32
	claims   map[int]claim

	in []*inConn
	// ep is an epoll instance that holds every connection of in, for
	// EPOLLIN: Progress reads only those it reports ready. A read of an
	// idle socket takes the socket's lock, which the loopback sender's
	// softirq then waits for (a third of a ping-pong's time in the kernel's
	// spinlock and tcp_recvmsg on the 2-core VM), and a rank with n peers
	// made n reads a poll; epoll_wait is one call, lockless for the
	// socket. byFD finds a ready connection; -1: no epoll (read them all).
	ep   int
	byFD map[int32]*inConn
	evs  [64]unix.EpollEvent
	rdy  []*inConn
	// dropped: a connection of in failed (its fd is -1) and is to go.
	dropped bool
	out     map[int]*outConn
	busy    []*outConn   // outbound connections with queued frames (connecting ones too)
	failed  map[int]bool // peers reported to Handler.PeerFailed
	closed  bool
	pfds    []unix.PollFd
}

var _ btl.Module = (*module)(nil)
var _ btl.Waiter = (*module)(nil)

func (m *module) Name() string    { return "tcp" }
func (m *module) Address() []byte { return m.addr }
func (m *module) Caps() btl.Caps {
	return btl.Caps{EagerLimit: eagerLimit, MaxFrag: 1 << 62, Exclusivity: btl.ExclusivityTCP}
}

// claim is how the one connection to a peer came about.
type claim uint8

const (
	claimNone   claim = iota
	claimDialed       // this rank dialed it
	claimTaken        // this rank took the peer's dial
)

// takeDial is the acceptor's verdict on an authenticated dial from rank.
// A peer of a lower rank is always taken: where both dialed, its dial
// wins. One of a higher rank is taken unless this rank has dialed it
// (then the peer waits for that connection) or has its connection.
func (m *module) takeDial(rank int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rank > m.env.Rank && m.claims[rank] != claimNone {
		return false
	}
	m.claims[rank] = claimTaken
	return true
}

// dialOrWait is the choice of a rank that sends to peer for the first
// time: dial it (true), or wait for the connection it dialed, which this
// rank has taken and Progress adopts (false).
func (m *module) dialOrWait(peer int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[peer] == claimTaken {
		return false
	}
	m.claims[peer] = claimDialed
	return true
}

func (m *module) acceptLoop() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return // listener closed
		}
		go m.admit(c)
	}
}

// admit authenticates one accepted connection and hands it to Progress.
// A connection that has not completed the handshake within the connect
// timeout is rejected, so a stranger that connects and stays silent holds
// this goroutine no longer.
func (m *module) admit(c net.Conn) {
	rank, yes, err := acceptHandshake(c, m.key, m.env.Rank, m.env.Size, m.connTimeout, m.takeDial)
	if errors.Is(err, errHungUp) {
		// Said nothing: a peer whose dial lost to this rank's, or a
		// probe of the port; nothing to tell the user.
		c.Close()
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gorun: tcp: rank %d: rejected connection from %s: %v\n", m.env.Rank, c.RemoteAddr(), err)
		c.Close()
		return
	}
	if !yes {
		// This rank dialed the peer as well (or has its connection
		// already); the peer uses that one.
		c.Close()
		return
	}
	fd, err := takeFD(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gorun: tcp: rank %d: connection from rank %d: %v\n", m.env.Rank, rank, err)
		return
	}
	ic := newInConn(fd, rank)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		unix.Close(fd)
		return
	}
	m.pending = append(m.pending, ic)
	m.npending.Add(1)
	m.mu.Unlock()
}

// takeFD detaches the socket of c into a non-blocking descriptor that the
// module reads and writes itself, and closes c.
func takeFD(c net.Conn) (int, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return -1, fmt.Errorf("not a TCP connection")
	}
	tc.SetNoDelay(true)
	rc, err := tc.SyscallConn()
	if err != nil {
		tc.Close()
		return -1, err
	}
	fd := -1
	var derr error
	rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) })
	tc.Close()
	if derr != nil {
		return -1, fmt.Errorf("dup socket: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set non-blocking: %w", err)
	}
	return fd, nil
}

func (m *module) Reach(p btl.Peer) (btl.Endpoint, error) {
	a, ok := p.Addrs["tcp"]
	if !ok || len(a) == 0 {
		return nil, nil
	}
	oc := m.outConn(p.Rank)
	if oc.sa == nil {
		sa, err := sockaddr(string(a))
		if err != nil {
			return nil, fmt.Errorf("tcp: rank %d: bad address %q: %w", p.Rank, a, err)
		}
		oc.addr, oc.sa = string(a), sa
	}
	return oc, nil
}

// outConn returns the sending side of the connection to rank, made on
// first use: by Reach, or by adopt when the peer's connection comes first.
func (m *module) outConn(rank int) *outConn {
	oc := m.out[rank]
	if oc == nil {
		oc = &outConn{m: m, rank: rank, fd: -1}
		m.out[rank] = oc
	}
	return oc
}

// adopt takes in the connections the acceptor took: each is read from
// now on, and written to (attach).
func (m *module) adopt() {
	m.mu.Lock()
	p := m.pending
	m.pending = nil
	m.npending.Store(0)
	m.mu.Unlock()
	for _, ic := range p {
		m.watch(ic)
		m.outConn(ic.rank).attach(ic)
	}
}

// watch adds ic to the connections Progress reads.
func (m *module) watch(ic *inConn) {
	if m.ep >= 0 {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ic.fd)}
		if err := unix.EpollCtl(m.ep, unix.EPOLL_CTL_ADD, ic.fd, &ev); err != nil {
			unix.Close(m.ep) // every connection is read again from now on
			m.ep = -1
		}
	}
	m.byFD[int32(ic.fd)] = ic
	m.in = append(m.in, ic)
}

// readAll: up to this many connections, Progress reads each instead of
// asking epoll which are ready. A message then costs one call, the read
// that finds it, where epoll_wait and the read are two: on the lent
// 16-core host osu_latency over TCP at np=2 (one connection each way)
// took 8.2-8.5 µs at 1-128 B with epoll against 7.5-8.2 without, medians
// of 3 (bench/results/tcp-epoll-2026-11-28-16core.txt).
const readAll = 2

// ready returns the connections with something to read: those epoll
// reports (level-triggered: what a poll left unread is reported again),
// or all of them without epoll or with few. The wait takes no time and
// cannot block, so it goes past the Go scheduler, as rawRead does.
func (m *module) ready() []*inConn {
	if m.ep < 0 || len(m.in) <= readAll {
		return m.in
	}
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(m.ep), uintptr(unsafe.Pointer(&m.evs[0])), uintptr(len(m.evs)), 0, 0, 0)
	if e == unix.EINTR {
		return nil // the next Progress looks again
	}
	if e != 0 {
		// Not one that goes away (EBADF, EINVAL, EFAULT): read every
		// connection from now on rather than none.
		unix.Close(m.ep)
		m.ep = -1
		return m.in
	}
	m.rdy = m.rdy[:0]
	for _, ev := range m.evs[:r] {
		if ic := m.byFD[ev.Fd]; ic != nil {
			m.rdy = append(m.rdy, ic)
		}
	}
	return m.rdy
}

func (m *module) Progress() int {
	if m.npending.Load() != 0 {
		m.adopt()
	}
	if len(m.in) == 0 && len(m.busy) == 0 {
		return 0 // a rank whose peers are all on its host polls this on every wait
	}
	n := 0
	for i := 0; i < len(m.busy); {
		oc := m.busy[i]
		switch oc.state {
		case stReady:
			n += oc.flush()
		case stFailed:
			// Failed since it was queued (its connection's reading
			// side failed: drop): its frames are done already.
		default:
			n += oc.advance()
		}
		if len(oc.queue) == 0 && (oc.state == stReady || oc.state == stFailed) {
			m.busy[i] = m.busy[len(m.busy)-1]
			m.busy = m.busy[:len(m.busy)-1]
			continue
		}
		i++
	}
	for _, ic := range m.ready() {
		if ic.fd < 0 {
			continue // failed earlier in this loop (ready is m.in without epoll)
		}
		k, err := ic.poll(m.env.Handler)
		n += k
		if err != nil {
			err = fmt.Errorf("tcp: from rank %d: %w", ic.rank, err)
			n += m.drop(ic, err)
			m.peerFailed(ic.rank, err)
		}
	}
	if m.dropped {
		m.in = slices.DeleteFunc(m.in, func(ic *inConn) bool { return ic.fd < 0 })
		m.dropped = false
	}
	return n
}

// drop closes a failed connection; Progress then takes it out of in. It
// leaves the epoll instance first: a close alone would not take it out
// while a child forked meanwhile (and not yet exec'd) holds the socket
// too, and the number's next connection would then get its events. The
// connection's sending side fails with err: it returns the frames that
// failed there.
func (m *module) drop(ic *inConn, err error) int {
	delete(m.byFD, int32(ic.fd))
	if m.ep >= 0 {
		unix.EpollCtl(m.ep, unix.EPOLL_CTL_DEL, ic.fd, nil)
	}
	unix.Close(ic.fd)
	ic.fd = -1
	m.dropped = true
	n := 0
	if oc := ic.out; oc != nil {
		ic.out, oc.in, oc.fd = nil, nil, -1 // closed above
		n = len(oc.queue)
		oc.fail(err)
	}
	return n
}

// peerFailed reports rank to the handler, once per peer whichever
// connection failed first.
func (m *module) peerFailed(rank int, err error) {
	if m.failed[rank] {
		return
	}
	m.failed[rank] = true
	m.env.Handler.PeerFailed(rank, err)
}

// Wait blocks in ppoll until a connection is readable, a blocked write can
// go on, a connect ends, a handshake message arrives, or d has passed.
func (m *module) Wait(d time.Duration) {
	if m.npending.Load() != 0 {
		return
	}
	m.pfds = m.pfds[:0]
	for _, ic := range m.in {
		m.pfds = append(m.pfds, unix.PollFd{Fd: int32(ic.fd), Events: unix.POLLIN})
	}
	for _, oc := range m.busy {
		if oc.hs != nil && oc.hs.err != nil {
			return // a failed connect for Progress to report
		}
		if oc.fd < 0 {
			continue // waiting for the peer's connection (stAwait)
		}
		ev := int16(unix.POLLOUT) // writable: connected, or a write can go on
		if oc.state == stChallenge || oc.state == stReply {
			ev = unix.POLLIN
		}
		m.pfds = append(m.pfds, unix.PollFd{Fd: int32(oc.fd), Events: ev})
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Ppoll(m.pfds, &ts, nil)
}

func (m *module) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.ln.Close()
	m.adopt()
	for _, ic := range m.in {
		if ic.fd >= 0 {
			unix.Close(ic.fd)
		}
		if oc := ic.out; oc != nil {
			ic.out, oc.in, oc.fd = nil, nil, -1 // closed above
		}
	}
	m.in = nil
	if m.ep >= 0 {
		unix.Close(m.ep)
		m.ep = -1
	}
	for _, oc := range m.out {
		oc.fail(btl.ErrClosed)
	}
	return nil
}

func (m *module) String() string { return "tcp rank " + strconv.Itoa(m.env.Rank) }
