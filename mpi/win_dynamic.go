package mpi

import (
	"fmt"
	"os"
	"unsafe"
)

// Dynamic windows (MPI-3 §11.2.4: MPI_Win_create_dynamic, MPI_Win_attach,
// MPI_Win_detach): a window made with no memory, to which each rank
// attaches slices, and detaches them, whenever it likes, without any
// collective call: for data structures that grow (lists, hash tables,
// trees in one-sided memory).
//
// Addressing. MPI addresses a dynamic window by absolute address
// (MPI_Get_address). Here Attach returns a displacement instead: the
// rank's attached slices are laid out one after another in a space of
// element displacements private to the window, never reused, with one
// element's gap between slices (so that no operation spans two). The
// attaching rank passes the displacement to the origins that use the
// slice (by a message, as MPI programs pass addresses); an operation
// addresses disp+i for the slice's element i.
//
// Errors. An origin cannot check a dynamic window's ranges, so the target
// does: an operation outside every slice attached there (never attached,
// detached, or past a slice's end) fails at the origin with ErrRMARange,
// where the operation completes (its Request, Flush, Unlock, Fence). For
// that, Put and Accumulate on a dynamic window are answered by the target
// (an empty acknowledgement), which they are not on other windows: they
// complete at the origin only once applied at the target.

// region is an attached slice of a dynamic window.
type region struct {
	base, n int64 // displacement and length, in elements
	mem     []byte
}

// WinCreateDynamic makes a window with no memory at any rank
// (MPI_Win_create_dynamic); each rank then exposes slices with Attach.
// Collective over c.
func WinCreateDynamic[T Element](c *Comm) (_ *Win[T], err error) {
	defer c.failTo(&err)
	w, err := newWin[T](c, "WinCreateDynamic", nil, true, nil)
	if err != nil {
		return nil, err
	}
	w.flavor = FlavorDynamic
	return w, nil
}

// Attach exposes buf through a dynamic window (MPI_Win_attach) and returns
// the displacement of buf[0] for the other ranks' operations (what
// MPI_Get_address gives an MPI program). buf must stay alive, and the
// Win keeps it so, until Detach. Attaching on a window not made by
// WinCreateDynamic fails with ErrRMAFlavor; an empty slice, or one that
// overlaps a slice attached already, with ErrRMAAttach. Local: no other
// rank takes part.
func (w *Win[T]) Attach(buf []T) (disp int, err error) {
	defer w.failTo(&err)
	const name = "Win.Attach"
	if err := w.live(name); err != nil {
		return 0, err
	}
	if !w.dynamic {
		return 0, errorf(ErrRMAFlavor, name, "%s was not made by WinCreateDynamic", w.name)
	}
	if len(buf) == 0 {
		return 0, errorf(ErrRMAAttach, name, "empty slice")
	}
	mem := elemBytes(buf)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	hi := lo + uintptr(len(mem))
	s := &w.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.regions {
		rlo := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
		if lo < rlo+uintptr(len(r.mem)) && rlo < hi {
			return 0, errorf(ErrRMAAttach, name, "the slice overlaps one attached already at displacement %d (%d elements)", r.base, r.n)
		}
	}
	r := region{base: s.next, n: int64(len(buf)), mem: mem}
	s.regions = append(s.regions, r)
	s.next += r.n + 1
	return int(r.base), nil
}

// Detach withdraws a slice that Attach exposed (MPI_Win_detach): buf must
// start where the attached slice starts and have its length; later
// operations on its displacements fail with ErrRMARange at their origins.
// Operations on it that this rank has served are complete; MPI leaves the
// rest undefined, and here an operation that arrives after Detach fails.
// A slice not attached gives ErrRMAAttach. Local.
func (w *Win[T]) Detach(buf []T) (err error) {
	defer w.failTo(&err)
	const name = "Win.Detach"
	if err := w.live(name); err != nil {
		return err
	}
	if !w.dynamic {
		return errorf(ErrRMAFlavor, name, "%s was not made by WinCreateDynamic", w.name)
	}
	mem := elemBytes(buf)
	s := &w.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.regions {
		if len(mem) > 0 && len(r.mem) == len(mem) && unsafe.SliceData(r.mem) == unsafe.SliceData(mem) {
			s.regions = append(s.regions[:i], s.regions[i+1:]...)
			return nil
		}
	}
	return errorf(ErrRMAAttach, name, "the slice (%d elements) is not attached to %s", len(buf), w.name)
}

// span returns the bytes of this rank's part of the window that an
// operation of h addresses, or nil when they lie outside it (outside every
// attached slice, for a dynamic window). srv.mu is held.
func (w *Win[T]) span(h *winHdr) []byte {
	if h.disp < 0 || h.count <= 0 {
		return nil
	}
	es := int64(w.es)
	if !w.dynamic {
		if h.count > int64(len(w.buf)) || h.disp > int64(len(w.buf))-h.count {
			return nil
		}
		return w.mem[h.disp*es : (h.disp+h.count)*es]
	}
	for _, r := range w.srv.regions {
		if h.disp >= r.base && h.count <= r.n && h.disp-r.base <= r.n-h.count {
			o := h.disp - r.base
			return r.mem[o*es : (o+h.count)*es]
		}
	}
	return nil
}

// winCheck is what an operation's reply must be for it to have
// succeeded (on: it has one): want bytes (a target answers an operation
// outside its memory with another length, see refuse).
type winCheck struct {
	on          bool
	want        int
	target      int
	kind        winKind
	disp, count int64
	name        string // the operation's call
}

// replyErr returns the error of the operation c checks when its reply
// had got bytes.
func (w *Win[T]) replyErr(c winCheck, got int) error {
	if !c.on || got == c.want {
		return nil
	}
	where := "its part of " + w.name
	if w.dynamic {
		where = "every slice it attached to " + w.name
	}
	return errorf(ErrRMARange, c.name, "%v of %d elements at %d: rank %d refused it, as outside %s", c.kind, c.count, c.disp, c.target, where)
}

// refuse answers an operation of src that addresses memory outside this
// rank's part: its data, if any, is taken and dropped (a zero-length
// receive: nothing is moved), and a reply of the length that tells the
// origin so goes back when the origin waits for one. srv.mu is held.
func (w *Win[T]) refuse(src int, h *winHdr) {
	if !w.dynamic {
		// The origin checked the range against the sizes it was given:
		// only a peer that is not gorun's, or a bug, sends this.
		fmt.Fprintf(os.Stderr, "gorun: %s: rank %d: %v of %d elements at %d is outside this rank's %d: refused\n",
			w.name, src, h.kind, h.count, h.disp, len(w.buf))
	}
	data := h.kind == wkPut || h.kind == wkAcc || h.kind == wkCAS || (h.kind == wkGetAcc && h.op != opNoOp)
	if data {
		if r, err := w.eng.Irecv(w.wc.ctx, w.wc.world[src], winTagData, []byte{}); err == nil {
			w.await(r.Done)
			w.eng.Release(r)
		}
	}
	w.answerRefused(src, h)
}

// answerRefused sends the reply that tells the origin its operation h
// failed at this rank, when the origin waits for one. srv.mu is held.
func (w *Win[T]) answerRefused(src int, h *winHdr) {
	switch {
	case h.kind == wkGet || h.kind == wkGetAcc || h.kind == wkCAS:
		w.reply(src, h.tag, []byte{}) // the origin wants count elements
	case h.flags&fStatus != 0:
		w.reply(src, h.tag, []byte{1}) // the origin wants none
	}
}
