package p2p

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gorun/gorun/btl"
)

// One-sided transfers: a process exposes memory (Expose), sends a peer the
// region by which that peer reaches it (Exposure.For, a few dozen bytes,
// by any message), and the peer then reads and writes the memory with
// GetFrom and PutTo, through the route's btl.RMA module, without the
// exposing process taking part: process_vm_readv/writev between ranks of
// one host (sm), RDMA on a fabric (ofi). This is what MPI windows need to
// be truly one-sided; there is no matching, no tag and no message, and a
// route without RMA for the memory gets no region (the caller falls back
// to messages).
//
// Both ends pick the route's first RMA module for host memory in registry
// order, as the RMA rendezvous does, so the module that registered the
// memory is the one that reaches it.

// Exposure is memory registered for peers' one-sided access.
type Exposure struct {
	e    *Engine
	m    btl.Mem
	regs []exposedReg
}

type exposedReg struct {
	rma  btl.RMA
	reg  btl.Region
	wire []byte
}

// Expose makes m reachable by peers' PutTo and GetFrom, registering it
// lazily, for each module that a peer's route uses, by For. Close
// releases the registrations; m must stay alive until then.
func (e *Engine) Expose(m btl.Mem) *Exposure { return &Exposure{e: e, m: m} }

// For returns the encoded region by which peer reaches the exposed memory,
// or nil when the route to peer has no RMA for it (peer is this process,
// on another host without a fabric, or the kernel refuses process_vm):
// send it to peer, which passes it to Reach. An empty exposure gets nil.
func (x *Exposure) For(peer int) ([]byte, error) {
	e := x.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if x.m.Len() == 0 || peer == e.rank {
		return nil, nil
	}
	rt, err := e.route(peer)
	if err != nil {
		return nil, fmt.Errorf("expose to rank %d: %w", peer, err)
	}
	mod := rt.rmaFor(x.m.Kind)
	if mod == nil {
		return nil, nil
	}
	for _, r := range x.regs {
		if r.rma == mod.rma {
			return r.wire, nil
		}
	}
	r := exposedReg{rma: mod.rma}
	if err := mod.rma.Register(x.m, &r.reg); err != nil {
		if errors.Is(err, btl.ErrRMARefused) {
			return nil, nil
		}
		return nil, fmt.Errorf("expose to rank %d: %w", peer, err)
	}
	r.wire = make([]byte, r.reg.EncodedLen())
	r.reg.Encode(r.wire)
	x.regs = append(x.regs, r)
	return r.wire, nil
}

// Close releases the exposure's registrations. Peers must have finished
// their transfers (MPI_Win_free synchronizes first).
func (x *Exposure) Close() {
	e := x.e
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range x.regs {
		x.regs[i].rma.Deregister(&x.regs[i].reg)
	}
	x.regs = nil
}

// Remote is a peer's exposed memory as this process reaches it.
type Remote struct {
	peer int
	reg  btl.Region
	rma  btl.RMA
}

// Reach decodes the region peer sent (from its Exposure.For) and returns
// the handle for PutTo and GetFrom; it fails when the region is malformed
// or this side's route to peer has no RMA module for it.
func (e *Engine) Reach(peer int, wire []byte) (*Remote, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	rm := &Remote{peer: peer}
	if err := btl.DecodeRegion(wire, &rm.reg); err != nil {
		return nil, fmt.Errorf("region of rank %d: %w", peer, err)
	}
	rt, err := e.route(peer)
	if err != nil {
		return nil, fmt.Errorf("reach rank %d: %w", peer, err)
	}
	mod := rt.rmaFor(rm.reg.Kind)
	if mod == nil || !mod.kinds.Has(btl.MemHost) {
		return nil, fmt.Errorf("reach rank %d: no RMA module for its %v memory", peer, rm.reg.Kind)
	}
	rm.rma = mod.rma
	return rm, nil
}

// Len is the length in bytes of the remote memory.
func (rm *Remote) Len() int { return int(rm.reg.Len) }

// PutTo starts copying local into rm at off bytes; the request completes
// once the bytes are in place at the peer, failed if the peer died or the
// range is outside rm. ErrRMARefused (wrapped) means nothing was started
// and the module will not do it: use messages.
func (e *Engine) PutTo(local btl.Mem, rm *Remote, off int) (*Request, error) {
	return e.oneSided(local, rm, off, true)
}

// GetFrom starts copying len(local) bytes of rm from off bytes into local;
// the request completes once they are in local.
func (e *Engine) GetFrom(local btl.Mem, rm *Remote, off int) (*Request, error) {
	return e.oneSided(local, rm, off, false)
}

// osOp is a one-sided transfer's RMA operation and its request, from
// osPool (one per Put or Get otherwise) and back there at RMADone.
type osOp struct {
	op btl.RMAOp
	r  *Request
}

var osPool = sync.Pool{New: func() any { return new(osOp) }}

// RMADone implements btl.RMACompleter: the transfer is over.
func (o *osOp) RMADone(op *btl.RMAOp, err error) {
	r := o.r
	r.frames--
	if err != nil {
		what := "put to"
		if r.recv {
			what = "get from"
		}
		err = fmt.Errorf("one-sided %s rank %d: %w", what, op.Peer, err)
	}
	r.complete(err)
	if r.pooled && r.frames == 0 {
		r.reset()
	}
	*o = osOp{} // the module is done with op (btl.RMA's contract)
	osPool.Put(o)
}

func (e *Engine) oneSided(local btl.Mem, rm *Remote, off int, put bool) (*Request, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if err := e.failed[rm.peer]; err != nil {
		return nil, fmt.Errorf("one-sided transfer with rank %d: %w", rm.peer, err)
	}
	if off < 0 {
		return nil, fmt.Errorf("one-sided transfer with rank %d: negative offset %d", rm.peer, off)
	}
	r := e.newRequest()
	r.recv, r.peer = !put, rm.peer
	r.st = Status{Source: rm.peer, Bytes: local.Len()}
	o := osPool.Get().(*osOp)
	o.r = r
	o.op = btl.RMAOp{Peer: rm.peer, Local: local, Remote: &rm.reg, Offset: uint64(off), Owner: o}
	if !o.op.InRegion() {
		r.reset()
		*o = osOp{}
		osPool.Put(o)
		return nil, fmt.Errorf("one-sided transfer with rank %d: %d bytes at %d outside its %d", rm.peer, local.Len(), off, rm.reg.Len)
	}
	r.frames++
	var err error
	if put {
		err = rm.rma.Put(&o.op)
	} else {
		err = rm.rma.Get(&o.op)
	}
	if err != nil {
		r.frames--
		r.reset()
		*o = osOp{}
		osPool.Put(o)
		return nil, err
	}
	return r, nil
}
