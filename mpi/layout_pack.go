package mpi

// Packing: how a layout's elements travel.
//
// The transports move one contiguous run of bytes per message (btl.Mem
// has no scatter-gather list, and neither p2p's eager frames nor its RMA
// regions describe several runs). So a layout whose elements are one run
// in order (Contiguous, a block of whole rows, an IndexedBlock of
// adjacent blocks) is sent and received in place, with no copy of
// package mpi's own; any other layout is packed once into a pooled
// scratch buffer (coll.Scratch) before a send and unpacked once from one
// after a receive. The data thus crosses memory one more time on each
// non-contiguous side than a contiguous message does, and the pooled
// scratch means no allocation per call once the pool is warm. Not done
// yet: handing the runs themselves to the transport (process_vm_readv
// and writev take iovec lists, tcp writes with writev), which needs
// scatter-gather in btl.Mem and in p2p's rendezvous.

import (
	"errors"
	"slices"

	"github.com/gorun/gorun/coll"
)

// runs calls fn(off, n) for each run of t's elements, in t's order,
// offsets counted in elements from base, until fn returns false; it
// returns false when fn did.
func (t *node) runs(base int, fn func(off, n int) bool) bool {
	for i := range t.count {
		d, n := t.block(i)
		if n == 0 || t.csize == 0 {
			continue
		}
		if t.crun || n == 1 && t.child.contig {
			if !fn(base+d+t.ctlb, n*t.csize) {
				return false
			}
			continue
		}
		for j := range n {
			if !t.child.runs(base+d+j*t.cext, fn) {
				return false
			}
		}
	}
	return true
}

// pack copies the elements t selects from src, es bytes each, to dst in
// t's order; dst holds t.size*es bytes.
func (t *node) pack(dst, src []byte, es int) {
	p := 0
	t.runs(0, func(off, n int) bool {
		p += copy(dst[p:], src[off*es:(off+n)*es])
		return true
	})
}

// unpack copies src into the elements t selects of dst, in t's order,
// until src runs out.
func (t *node) unpack(dst, src []byte, es int) {
	if len(src) == 0 {
		return
	}
	t.runs(0, func(off, n int) bool {
		src = src[copy(dst[off*es:(off+n)*es], src):]
		return len(src) > 0
	})
}

// check fails (ErrArg) when l is invalid or does not fit in a slice of n
// elements.
func (l Layout) check(op string, n int) error {
	if l.err != nil {
		return reop(op, l.err)
	}
	t := l.node()
	if t.size > 0 && (t.tlb < 0 || t.tub > n) {
		return errorf(ErrArg, op, "layout spans elements %d to %d, outside a slice of %d", t.tlb, t.tub-1, n)
	}
	return nil
}

// Pack appends the elements of buf that l selects, in l's order, to dst
// and returns the extended slice (MPI_Pack). It fails with ErrArg when l
// is invalid or reaches outside buf.
func Pack[T Element](dst, buf []T, l Layout) ([]T, error) {
	if err := l.check("Pack", len(buf)); err != nil {
		return dst, err
	}
	t := l.node()
	n := len(dst)
	dst = slices.Grow(dst, t.size)[:n+t.size]
	t.pack(elemBytes(dst[n:]), elemBytes(buf), elemSize[T]())
	return dst, nil
}

// Unpack stores the elements of packed, in order, into the elements of
// buf that l selects (MPI_Unpack), and returns how many it stored: all of
// packed, or l.Size() when packed is longer. It fails with ErrArg when l
// is invalid or reaches outside buf.
func Unpack[T Element](buf []T, l Layout, packed []T) (int, error) {
	if err := l.check("Unpack", len(buf)); err != nil {
		return 0, err
	}
	t := l.node()
	n := min(len(packed), t.size)
	t.unpack(elemBytes(buf), elemBytes(packed[:n]), elemSize[T]())
	return n, nil
}

// wire is what a call moves for a slice and a layout: a view of the
// slice when the layout is one run, else pooled scratch (own) that the
// layout is packed into or unpacked from.
type wire struct {
	b   []byte
	own *[]byte // the scratch b lies in; nil for a view
}

// wireFor checks l against buf and returns the bytes a call moves; for a
// send (out) it packs them. A ProcNull peer moves nothing, so nothing is
// packed.
func wireFor[T Element](op string, buf []T, l Layout, peer int, out bool) (wire, error) {
	if err := l.check(op, len(buf)); err != nil {
		return wire{}, err
	}
	t := l.node()
	es := elemSize[T]()
	switch {
	case peer == ProcNull || t.size == 0:
		return wire{b: []byte{}}, nil
	case t.contig:
		return wire{b: elemBytes(buf)[t.tlb*es : t.tub*es]}, nil
	}
	p := coll.Scratch(t.size * es)
	w := wire{b: *p, own: p}
	if out {
		t.pack(w.b, elemBytes(buf), es)
	}
	return w, nil
}

// unpackTo stores the n received bytes of w into buf under l, unless the
// receive failed (a truncated one stored its first bytes, and they go).
func (w wire) unpackTo(buf []byte, l Layout, es, n int, err error) {
	if w.own != nil && (err == nil || errors.Is(err, ErrTruncate)) {
		l.node().unpack(buf, w.b[:n], es)
	}
}

// release gives w's scratch back to the pool.
func (w wire) release() {
	coll.ReleaseScratch(w.own)
}
