package tcp

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

func init() { btl.Register("tcp", component{}) }

type component struct{}

// eagerLimit is TCP's eager/rendezvous switch: 64 KiB, Open MPI's own
// btl_tcp_eager_limit, where one extra round trip stops mattering against
// the copy.
const eagerLimit = 64 << 10

// dialTimeout bounds a lazy connect to a peer.
const dialTimeout = 10 * time.Second

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
		env:  env,
		key:  deriveKey(env.Secret),
		ln:   ln,
		out:  make(map[int]*outConn),
		addr: []byte(ln.Addr().String()),
	}
	go m.acceptLoop()
	return m, nil
}

type module struct {
	env  btl.Env
	key  []byte
	ln   net.Listener
	addr []byte

	// Accepted connections wait in pending until Progress adopts them.
	mu       sync.Mutex
	pending  []*inConn
	npending atomic.Int32

	in     []*inConn
	out    map[int]*outConn
	busy   []*outConn // outbound connections with queued frames
	closed bool
	pfds   []unix.PollFd
}

var _ btl.Module = (*module)(nil)
var _ btl.Waiter = (*module)(nil)

func (m *module) Name() string    { return "tcp" }
func (m *module) Address() []byte { return m.addr }
func (m *module) Caps() btl.Caps {
	return btl.Caps{EagerLimit: eagerLimit, MaxFrag: 1 << 62, Exclusivity: btl.ExclusivityTCP}
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
func (m *module) admit(c net.Conn) {
	rank, err := acceptHandshake(c, m.key, m.env.Rank, m.env.Size)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gorun: tcp: rank %d: rejected connection from %s: %v\n", m.env.Rank, c.RemoteAddr(), err)
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
	if _, _, err := net.SplitHostPort(string(a)); err != nil {
		return nil, fmt.Errorf("bad address %q: %w", a, err)
	}
	oc := m.out[p.Rank]
	if oc == nil {
		oc = &outConn{m: m, rank: p.Rank, addr: string(a), fd: -1}
		m.out[p.Rank] = oc
	}
	return oc, nil
}

func (m *module) adopt() {
	m.mu.Lock()
	m.in = append(m.in, m.pending...)
	m.pending = m.pending[:0]
	m.npending.Store(0)
	m.mu.Unlock()
}

func (m *module) Progress() int {
	if m.npending.Load() != 0 {
		m.adopt()
	}
	n := 0
	for i := 0; i < len(m.busy); {
		oc := m.busy[i]
		n += oc.flush()
		if len(oc.queue) == 0 {
			m.busy[i] = m.busy[len(m.busy)-1]
			m.busy = m.busy[:len(m.busy)-1]
			continue
		}
		i++
	}
	for i := 0; i < len(m.in); {
		ic := m.in[i]
		k, err := ic.poll(m.env.Handler)
		n += k
		if err != nil {
			unix.Close(ic.fd)
			m.in[i] = m.in[len(m.in)-1]
			m.in = m.in[:len(m.in)-1]
			m.env.Handler.PeerFailed(ic.rank, fmt.Errorf("tcp: from rank %d: %w", ic.rank, err))
			continue
		}
		i++
	}
	return n
}

// Wait blocks in ppoll until a connection is readable, a blocked write can
// go on, or d has passed.
func (m *module) Wait(d time.Duration) {
	if m.npending.Load() != 0 {
		return
	}
	m.pfds = m.pfds[:0]
	for _, ic := range m.in {
		m.pfds = append(m.pfds, unix.PollFd{Fd: int32(ic.fd), Events: unix.POLLIN})
	}
	for _, oc := range m.busy {
		if oc.fd >= 0 {
			m.pfds = append(m.pfds, unix.PollFd{Fd: int32(oc.fd), Events: unix.POLLOUT})
		}
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
		unix.Close(ic.fd)
	}
	m.in = nil
	for _, oc := range m.out {
		oc.fail(btl.ErrClosed)
	}
	return nil
}

func (m *module) String() string { return "tcp rank " + strconv.Itoa(m.env.Rank) }
