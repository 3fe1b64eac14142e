//go:build cgo && ofi

package ofi

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/gorun/gorun/btl"
)

// RMAKinds: host memory with every peer this module reaches, except a
// peer on this host that btl/sm also reaches: p2p takes the first module
// in registry order that offers RMA, and process_vm_readv beats a trip
// through the network stack.
func (m *module) RMAKinds(peer btl.Peer) btl.Kinds {
	if m.closed {
		return 0
	}
	if _, sm := peer.Addrs["sm"]; sm && peer.HostID == m.env.HostID {
		return 0
	}
	if ep, err := m.Reach(peer); err != nil || ep == nil {
		return 0
	}
	return btl.KindsOf(btl.MemHost)
}

// regVal is a cached registration: the provider's handle and the pin that
// keeps its Go memory in place.
type regVal struct {
	mr  mr
	pin *runtime.Pinner
}

func (m *module) releaseMR(e *regEntry[regVal]) {
	m.f.deregister(e.val.mr)
	e.val.pin.Unpin()
}

// regKeyLen is the size of a region's key: the provider's 64-bit key.
const regKeyLen = 8

// reg returns a referenced registration of b, from the cache or new.
func (m *module) reg(b []byte) (*regEntry[regVal], error) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if e := m.cache.get(uintptr(p), len(b)); e != nil {
		return e, nil
	}
	pin := new(runtime.Pinner)
	pin.Pin(p)
	m.nextKey++
	r, err := m.f.register(p, len(b), m.nextKey)
	if err != nil {
		pin.Unpin()
		return nil, fmt.Errorf("%w: ofi: register %d bytes: %w", btl.ErrRMARefused, len(b), err)
	}
	return m.cache.put(uintptr(p), len(b), regVal{r, pin}), nil
}

// Register registers host memory (device memory is staged by p2p: doc.go,
// "Provider and selection"), through the cache.
func (m *module) Register(mem btl.Mem, r *btl.Region) error {
	if m.closed {
		return btl.ErrClosed
	}
	if mem.Kind != btl.MemHost {
		return fmt.Errorf("%w: ofi registers host memory only, not %v", btl.ErrRMARefused, mem.Kind)
	}
	*r = btl.Region{Kind: btl.MemHost, Len: uint64(len(mem.Bytes))}
	if len(mem.Bytes) == 0 {
		return nil
	}
	e, err := m.reg(mem.Bytes)
	if err != nil {
		return err
	}
	if m.f.mrMode&fiMRVirtAddr != 0 {
		r.Addr = uint64(e.key.addr)
	}
	var k [regKeyLen]byte
	binary.LittleEndian.PutUint64(k[:], e.val.mr.key)
	r.SetKey(k[:])
	r.Handle = e
	return nil
}

func (m *module) Deregister(r *btl.Region) {
	e, ok := r.Handle.(*regEntry[regVal])
	if !ok || m.closed {
		return
	}
	r.Handle = nil
	m.cache.unref(e)
}

// rmaReq is one Get or Put: split into parts of at most the provider's
// largest message, each in a context slot of its own.
type rmaReq struct {
	op      *btl.RMAOp
	p       *peer
	write   bool
	local   *regEntry[regVal]
	key     uint64
	posted  int // bytes posted
	pending int // parts posted and not completed
	err     error
	done    bool
}

func (m *module) Get(op *btl.RMAOp) error { return m.start(op, false) }
func (m *module) Put(op *btl.RMAOp) error { return m.start(op, true) }

func (m *module) start(op *btl.RMAOp, write bool) error {
	if m.closed {
		return btl.ErrClosed
	}
	what := "get from"
	if write {
		what = "put to"
	}
	if op.Peer < 0 || op.Peer >= len(m.peers) || m.peers[op.Peer] == nil || !m.peers[op.Peer].reached {
		return fmt.Errorf("ofi: %s rank %d: not reached", what, op.Peer)
	}
	p := m.peers[op.Peer]
	if p.failed != nil {
		return p.failed
	}
	if op.Local.Kind != btl.MemHost || op.Remote.Kind != btl.MemHost {
		return fmt.Errorf("%w: ofi: %s rank %d: %v to %v memory", btl.ErrRMARefused, what, op.Peer, op.Local.Kind, op.Remote.Kind)
	}
	if !op.InRegion() {
		// A peer's mistake, not a refusal: the transfer fails (p2p
		// would otherwise send the part by frames, ErrRMARefused).
		return fmt.Errorf("ofi: %s rank %d: %d bytes at %d leave a region of %d", what, op.Peer, op.Local.Len(), op.Offset, op.Remote.Len)
	}
	if len(op.Remote.Key()) != regKeyLen {
		return fmt.Errorf("ofi: %s rank %d: key of %d bytes", what, op.Peer, len(op.Remote.Key()))
	}
	if op.Local.Len() == 0 {
		op.Owner.RMADone(op, nil)
		return nil
	}
	local, err := m.reg(op.Local.Bytes)
	if err != nil {
		return err
	}
	r := &rmaReq{op: op, p: p, write: write, local: local, key: binary.LittleEndian.Uint64(op.Remote.Key())}
	p.rmas++
	m.rmaQueue = append(m.rmaQueue, r)
	m.startQueued()
	return nil
}

// startQueued posts the parts of queued operations, in order, while
// context slots last and the provider takes them.
func (m *module) startQueued() {
	for len(m.rmaQueue) > 0 {
		r := m.rmaQueue[0]
		if r.done {
			m.rmaQueue = m.rmaQueue[1:]
			continue
		}
		if !r.post() {
			return
		}
		m.rmaQueue[0] = nil
		m.rmaQueue = m.rmaQueue[1:]
	}
}

// post posts r's remaining parts; false when it must wait for a slot.
func (r *rmaReq) post() bool {
	m := r.p.m
	b := r.op.Local.Bytes
	for r.posted < len(b) {
		if r.p.failed != nil {
			r.stop(r.p.failed)
			return true
		}
		if len(m.rmaFree) == 0 {
			return false
		}
		slot := m.rmaFree[len(m.rmaFree)-1]
		n := min(len(b)-r.posted, m.f.maxMsg)
		remote := r.op.Remote.Addr + r.op.Offset + uint64(r.posted)
		rc := m.f.rma(r.write, nRecv+nSend+slot, unsafe.Pointer(&b[r.posted]), n, r.local.val.mr.desc, r.p.addr, remote, r.key)
		if isEAGAIN(rc) {
			return false
		}
		if rc != 0 {
			r.stop(fmt.Errorf("ofi: rdma with rank %d: %s", r.p.rank, errText(rc)))
			return true
		}
		m.rmaFree = m.rmaFree[:len(m.rmaFree)-1]
		m.rma[slot] = r
		r.posted += n
		r.pending++
		r.p.inflight++
	}
	return true
}

// rmaComplete handles the completion of a part in slot.
func (m *module) rmaComplete(slot int, err error) {
	r := m.rma[slot]
	m.rma[slot] = nil
	m.rmaFree = append(m.rmaFree, slot)
	if r == nil {
		return
	}
	r.pending--
	r.p.inflight--
	if err != nil {
		r.p.fail(err)
		r.stop(fmt.Errorf("ofi: rdma with rank %d: %w", r.p.rank, err))
		return
	}
	r.p.heard = time.Now()
	if r.pending == 0 && r.posted == len(r.op.Local.Bytes) {
		r.finish(r.err) // r.err: a part failed before (stop)
	}
}

// stop posts nothing more of r: it ends with its first error, err unless
// it had one, once the parts posted have completed.
func (r *rmaReq) stop(err error) {
	if r.err == nil {
		r.err = err
	}
	r.posted = len(r.op.Local.Bytes)
	if r.pending == 0 {
		r.finish(r.err)
	}
}

// finish reports r done, once, and drops its local registration.
func (r *rmaReq) finish(err error) {
	if r.done {
		return
	}
	r.done = true
	r.p.rmas--
	if r.local != nil {
		r.p.m.cache.unref(r.local)
		r.local = nil
	}
	r.op.Owner.RMADone(r.op, err)
}
