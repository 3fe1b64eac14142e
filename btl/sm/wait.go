package sm

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

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
	now := nanotime()
	if now < p.next {
		return
	}
	p.next = now + int64(livenessEvery)
	if err := m.alive(p); err != nil {
		m.failPeer(p, err)
	}
}

var start = time.Now()

func nanotime() int64 { return int64(time.Since(start)) }

// alive reports why p can no longer move frames, or nil: it closed its
// module, or its process exited (a pidfd turns readable at exit, zombie or
// not; kill(pid, 0) where pidfds are missing).
func (m *module) alive(p *peer) error {
	if p.seg != nil && atomic.LoadUint32(u32(p.seg.ctl, offClosed)) != 0 {
		return fmt.Errorf("sm: rank %d closed its transport during a transfer", p.rank)
	}
	if p.in != nil && p.in.inFrame && atomic.LoadUint32(u32(p.in.mem, offProdClosed)) != 0 {
		return fmt.Errorf("sm: rank %d closed its transport during a transfer", p.rank)
	}
	if p.pid <= 0 || p.pid == os.Getpid() {
		return nil
	}
	if p.pidfd == -1 {
		fd, err := unix.PidfdOpen(p.pid, 0)
		switch {
		case err == nil:
			p.pidfd = fd
		case err == unix.ESRCH:
			return m.exited(p)
		default:
			p.pidfd = -2
		}
	}
	if p.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(fds, 0); n > 0 {
			return m.exited(p)
		}
		return nil
	}
	if err := unix.Kill(p.pid, 0); err == unix.ESRCH {
		return m.exited(p)
	}
	return nil
}

func (m *module) exited(p *peer) error {
	return fmt.Errorf("sm: rank %d (pid %d) exited during a transfer with rank %d", p.rank, p.pid, m.env.Rank)
}
