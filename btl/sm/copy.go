package sm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/gorun/gorun/btl"
	"golang.org/x/sys/unix"
)

// prSetPtracerAny is PR_SET_PTRACER's "any process" (linux/prctl.h: -1).
const prSetPtracerAny = ^uintptr(0)

// allowPeerReads lets the other ranks of this host read this process's
// memory with process_vm_readv (single copy), unless
// GORUN_SM_SINGLE_COPY=none. Under Yama's ptrace_scope 1, the default of
// Ubuntu and others, a process may only read its descendants' memory, so
// ranks, which are siblings, were refused: every rendezvous between
// non-root ranks went through the rings at a fifth of the bandwidth (5
// against 25-32 GB/s at 256 KiB-4 MiB, np=2 on the 2-core VM), and said
// nothing. PR_SET_PTRACER_ANY lets any process of this user attach to
// this one, as ptrace_scope 0 lets any, until Close withdraws it; Open
// MPI's vader and Charm++ do the same for their CMA. Without Yama the call fails (EINVAL), harmlessly. It runs before
// the segment is made, so that no peer's probe comes before it.
func allowPeerReads() {
	if pSingleCopy() != "none" {
		unix.Prctl(unix.PR_SET_PTRACER, prSetPtracerAny, 0, 0, 0)
	}
}

// singleCopyInit decides whether single copy is on for this module: off
// by GORUN_SM_SINGLE_COPY=none, or when the kernel refuses
// process_vm_readv even on this process itself (seccomp filters in some
// containers answer ENOSYS or EPERM): local rank 0 says so then, once.
// Refusals that depend on the peer (Yama's ptrace_scope 2 or 3, other
// credentials) are found per peer by probe (copyPeer).
func (m *module) singleCopyInit() {
	switch v := pSingleCopy(); v {
	case "none":
		m.noCopy = "GORUN_SM_SINGLE_COPY=none"
		return
	case "cma", "":
	default:
		fmt.Fprintf(os.Stderr, "gorun: sm: rank %d: GORUN_SM_SINGLE_COPY=%q: want cma or none; using cma\n", m.env.Rank, v)
	}
	var probe [8]byte
	if err := vmRead(os.Getpid(), uintptr(unsafe.Pointer(&m.own.ctl[0])), probe[:]); err != nil {
		m.noCopy = fmt.Sprintf("process_vm_readv: %v", err)
	} else if binary.LittleEndian.Uint64(probe[:]) != segMagic {
		m.noCopy = "process_vm_readv returned wrong bytes"
	}
	if m.noCopy != "" && speaksForHost(m.env) {
		m.saidNoCopy = true
		fmt.Fprintf(os.Stderr, "gorun: sm: single copy between the ranks of this host is off (%s): %s\n", m.noCopy, noCopyCost)
	}
}

// noCopyCost is what a rank says when single copy is refused; twoCopies
// is the cost, said by sayRefused too.
const (
	twoCopies  = "go through the shared-memory rings, two copies instead of one"
	noCopyCost = "messages above the eager limit " + twoCopies + "; allow process_vm_readv (a container's seccomp profile, docker run --cap-add=SYS_PTRACE), or set GORUN_SM_SINGLE_COPY=none to go without it silently"
)

// RMAKinds is host memory for a peer that single copy works with: single
// copy is on, peer is a local rank whose segment this module can open, and
// reading 8 bytes of that segment's header from the peer's memory returns
// its magic (probed once per peer); empty otherwise.
func (m *module) RMAKinds(peer btl.Peer) btl.Kinds {
	if peer.HostID != m.env.HostID {
		return 0
	}
	if p := m.copyPeer(peer.Rank); p != nil && p.cma > 0 {
		return btl.KindsOf(btl.MemHost)
	}
	return 0
}

func (m *module) copyPeer(rank int) *peer {
	if m.closed || m.noCopy != "" || rank < 0 || rank >= m.env.Size || rank == m.env.Rank {
		return nil
	}
	p := m.peer(rank)
	if p.cma == 0 {
		p.cma = -1
		if p.seg == nil && m.open(p, segName(m.env.JobID, rank)) != nil {
			p.cma = 0 // not local, or not yet there: ask again later
			return nil
		}
		var probe [8]byte
		err := vmRead(p.seg.pid, uintptr(p.seg.addr), probe[:])
		if err == nil && binary.LittleEndian.Uint64(probe[:]) == segMagic {
			p.cma = 1
		} else if refused(err) {
			m.sayRefused(rank, "process_vm_readv", err)
		}
	}
	return p
}

// Register describes host memory by its virtual address: process_vm
// needs no registration and no key, so there is nothing to cache.
func (m *module) Register(mem btl.Mem, r *btl.Region) error {
	if mem.Kind != btl.MemHost {
		return fmt.Errorf("sm: rank %d: register %v: %w (process_vm reaches host memory only)", m.env.Rank, mem, btl.ErrRMARefused)
	}
	*r = btl.Region{Kind: btl.MemHost, Addr: uint64(mem.Addr()), Len: uint64(len(mem.Bytes))}
	return nil
}

// Deregister has nothing to release.
func (m *module) Deregister(r *btl.Region) {}

// Get copies with process_vm_readv before it returns, and reports the
// outcome through RMADone from inside the call: the copy touches only
// memory, never waits on a peer (btl/doc.go).
func (m *module) Get(op *btl.RMAOp) error { return m.rma(op, false) }

// Put is Get's mirror, with process_vm_writev.
func (m *module) Put(op *btl.RMAOp) error { return m.rma(op, true) }

func (m *module) rma(op *btl.RMAOp, write bool) error {
	what, call := "get from", "process_vm_readv"
	if write {
		what, call = "put to", "process_vm_writev"
	}
	n := op.Local.Len()
	if op.Local.Kind != btl.MemHost || op.Remote.Kind != btl.MemHost {
		return fmt.Errorf("sm: rank %d: %s rank %d: %v and %v: %w (host memory only)", m.env.Rank, what, op.Peer, op.Local, op.Remote.Kind, btl.ErrRMARefused)
	}
	if !op.InRegion() {
		return fmt.Errorf("sm: rank %d: %s rank %d: %d bytes at %d outside its region of %d", m.env.Rank, what, op.Peer, n, op.Offset, op.Remote.Len)
	}
	p, err := m.copyCheck(op.Peer, what)
	if err != nil {
		return err
	}
	addr := uintptr(op.Remote.Addr + op.Offset)
	if write {
		err = vmWrite(p.seg.pid, addr, op.Local.Bytes)
	} else {
		err = vmRead(p.seg.pid, addr, op.Local.Bytes)
	}
	if err != nil {
		err = m.copyErr(p, what, call, err)
	}
	op.Owner.RMADone(op, err)
	return nil
}

func (m *module) copyCheck(peer int, op string) (*peer, error) {
	p := m.copyPeer(peer)
	if p == nil || p.cma <= 0 {
		why := m.noCopy
		if why == "" {
			why = "the kernel refused the probe, or the peer is not local"
		}
		return nil, fmt.Errorf("sm: rank %d: %s rank %d: %w (%s)", m.env.Rank, op, peer, btl.ErrRMARefused, why)
	}
	return p, nil
}

// sayRefused says, once a rank, that single copy with peer is refused:
// a peer whose memory the kernel keeps from this one (Yama's ptrace_scope
// 2 or 3, a peer of other credentials, one made non-dumpable, at the
// probe or later).
func (m *module) sayRefused(peer int, call string, err error) {
	if m.saidNoCopy {
		return
	}
	m.saidNoCopy = true
	fmt.Fprintf(os.Stderr, "gorun: sm: rank %d: single copy with rank %d is refused (%s: %v%s): messages above the eager limit between the two %s (the kernel keeps one process's memory from the other: Yama's ptrace_scope 2 or 3, other credentials, a process made non-dumpable); this rank says so once\n", m.env.Rank, peer, call, err, yamaScope(), twoCopies)
}

// copyErr turns a refusal into ErrRMARefused (and stops trying with that
// peer); other errors (EFAULT: a bad address; ESRCH: the peer is gone)
// are returned as they are.
func (m *module) copyErr(p *peer, op, call string, err error) error {
	if refused(err) {
		p.cma = -1
		m.sayRefused(p.rank, call, err)
		return fmt.Errorf("sm: rank %d: %s rank %d: %w (%v)", m.env.Rank, op, p.rank, btl.ErrRMARefused, err)
	}
	return fmt.Errorf("sm: rank %d: %s rank %d (pid %d): %w", m.env.Rank, op, p.rank, p.seg.pid, err)
}

// vmRead and vmWrite loop over partial transfers.
func vmRead(pid int, addr uintptr, b []byte) error { return vmCopy(pid, addr, b, false) }

func vmWrite(pid int, addr uintptr, b []byte) error { return vmCopy(pid, addr, b, true) }

func vmCopy(pid int, addr uintptr, b []byte, write bool) error {
	for len(b) > 0 {
		local := []unix.Iovec{{Base: &b[0]}}
		local[0].SetLen(len(b))
		remote := []unix.RemoteIovec{{Base: addr, Len: len(b)}}
		var n int
		var err error
		if write {
			n, err = unix.ProcessVMWritev(pid, local, remote, 0)
		} else {
			n, err = unix.ProcessVMReadv(pid, local, remote, 0)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("no progress after %d bytes: %w", len(b), unix.EFAULT)
		}
		b = b[n:]
		addr += uintptr(n)
	}
	return nil
}

// refused reports whether err is the kernel refusing single copy (not a
// bad address, not a peer gone).
func refused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EACCES)
}

// yamaScope names Yama's ptrace_scope when it refuses attaching whatever
// the ranks do (2 or 3), for the line that says single copy was refused.
func yamaScope() string {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if v := strings.TrimSpace(string(b)); err == nil && (v == "2" || v == "3") {
		return "; Yama's ptrace_scope is " + v
	}
	return ""
}
