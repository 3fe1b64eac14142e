package sm

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

// Futex operations on shared (not process-private) words: the key is the
// file page, so every process mapping the segment meets on it.
const (
	opFutexWait = 0
	opFutexWake = 1
)

func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), opFutexWake, 1<<30, 0, 0, 0)
}

// futexSleep sleeps while *addr == val, at most d. EAGAIN (the word moved),
// EINTR and ETIMEDOUT all just return.
func futexSleep(addr *uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), opFutexWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// Wait sleeps on this rank's futex word until a sender publishes a
// fragment, a consumer frees room in a ring this rank waits to fill, a new
// sender registers, or d passes (capped at livenessEvery, so that stalled
// transfers keep checking their peers). Senders bump the word and call
// FUTEX_WAKE only when the waiters count is non-zero, so the fast path
// costs them one load.
func (m *module) Wait(d time.Duration) {
	if m.closed {
		return
	}
	d = min(d, livenessEvery)
	ctl := m.own.ctl
	w, seq := u32(ctl, offWaiters), u32(ctl, offSeq)
	m.waits++
	atomic.AddUint32(w, 1)
	v := atomic.LoadUint32(seq)
	if !m.ready() {
		futexSleep(seq, v, d)
	}
	atomic.AddUint32(w, ^uint32(0))
}

// ready reports whether Progress has something to do right now.
func (m *module) ready() bool {
	if atomic.LoadUint32(u32(m.own.ctl, offNReg)) != m.nseen {
		return true
	}
	if m.bellOn {
		// A publish after the last swap rang (or found its bit still
		// set, and no swap since): doc.go, "Doorbell".
		for _, bp := range m.bells {
			if atomic.LoadUint64(bp) != 0 {
				return true
			}
		}
		for _, r := range m.hot {
			if r.p.err == nil && (r.more || r.ready()) {
				return true
			}
		}
	} else {
		for _, r := range m.in {
			if r.p.err == nil && r.ready() {
				return true
			}
		}
	}
	for _, o := range m.busy {
		if o.err == nil && len(o.queue) > 0 && o.fits(o.nextLen()) {
			return true
		}
	}
	return false
}

// stalled is called when a transfer with p made no progress in a poll; at
// most every livenessEvery it checks that p is still there. The clock is
// read on every stallEvery-th call, and on the first after a Wait (calls
// far apart in time): a sender spinning on a full ring polls every ~100
// ns, and reading the clock on each cost 8.6% of its time (pprof, 8-byte
// message rate at np=2).
func (m *module) stalled(p *peer) {
	p.stalls++
	if p.stalls < stallEvery && p.waits == m.waits {
		return
	}
	p.stalls, p.waits = 0, m.waits
	if !p.due() {
		return
	}
	if err := m.alive(p); err != nil {
		m.failPeer(p, err)
	}
}

// due reports whether p's liveness is to be looked at now: at most every
// livenessEvery (stalled, CheckPeer).
func (p *peer) due() bool {
	now := nanotime()
	if now < p.next {
		return false
	}
	p.next = now + int64(livenessEvery)
	return true
}

var start = time.Now()

func nanotime() int64 { return int64(time.Since(start)) }

// alive reports why p can no longer move frames, or nil: it closed its
// module, or its process exited.
func (m *module) alive(p *peer) error {
	switch m.gone(p) {
	case peerClosed:
		return fmt.Errorf("sm: rank %d closed its transport during a transfer", p.rank)
	case peerExited:
		return m.exited(p)
	}
	return nil
}

// How a peer is gone (gone).
const (
	peerHere = iota
	peerClosed
	peerExited
)

// gone tells whether p closed its module (its segment's or its ring's
// closed flag) or its process exited (a pidfd turns readable at exit,
// zombie or not; kill(pid, 0) where pidfds are missing).
func (m *module) gone(p *peer) int {
	if p.seg != nil && atomic.LoadUint32(u32(p.seg.ctl, offClosed)) != 0 {
		return peerClosed
	}
	if p.in != nil && p.in.inFrame && atomic.LoadUint32(u32(p.in.mem, offProdClosed)) != 0 {
		return peerClosed
	}
	if p.pid <= 0 || p.pid == os.Getpid() {
		return peerHere
	}
	if p.pidfd == -1 {
		fd, err := unix.PidfdOpen(p.pid, 0)
		switch {
		case err == nil:
			p.pidfd = fd
		case err == unix.ESRCH:
			return peerExited
		default:
			p.pidfd = -2
		}
	}
	if p.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 0); n > 0 {
			return peerExited
		}
		return peerHere
	}
	if err := unix.Kill(p.pid, 0); err == unix.ESRCH {
		return peerExited
	}
	return peerHere
}

// CheckPeer is btl.Checker's: whether a peer of this host closed its
// transport or its process exited, looked at most every livenessEvery
// per peer (a poll of its pidfd), with nothing in flight to it. A peer
// found gone fails as one found during a transfer does (failPeer).
func (m *module) CheckPeer(bp btl.Peer) {
	if m.closed || bp.Rank == m.env.Rank || bp.Rank < 0 || bp.Rank >= m.env.Size || bp.HostID != m.env.HostID {
		return
	}
	p := m.peer(bp.Rank)
	if p.err != nil || !p.due() {
		return
	}
	if p.pid == 0 {
		p.pid = bp.PID
	}
	switch m.gone(p) {
	case peerClosed:
		m.failPeer(p, fmt.Errorf("sm: rank %d has closed its transport (it finalized)", p.rank))
	case peerExited:
		m.failPeer(p, fmt.Errorf("sm: rank %d (pid %d) has exited", p.rank, p.pid))
	}
}

func (m *module) exited(p *peer) error {
	return fmt.Errorf("sm: rank %d (pid %d) exited during a transfer with rank %d", p.rank, p.pid, m.env.Rank)
}
