package gpu

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorun/gorun/gpu/cuda"
)

// PushWords are the host side of a PushRegion's Err and Done words: 16
// bytes of pinned host memory mapped for the device, the error word (u32)
// at 0 and the completion word (u64) at 8. Wait uses them to wait for a
// push kernel.
type PushWords struct {
	mem  *cuda.HostMem
	err  *atomic.Uint32
	done *atomic.Uint64
}

// NewPushWords allocates zeroed words for push kernels on device dev.
func NewPushWords(dev int) (*PushWords, error) {
	ctx, err := DeviceContext(dev)
	if err != nil {
		return nil, err
	}
	m, err := ctx.HostAlloc(16, cuda.HostDeviceMap) // page-aligned: the u64 at 8 is too
	if err != nil {
		return nil, fmt.Errorf("gpu: push words: %w", err)
	}
	b := m.Bytes()
	clear(b)
	return &PushWords{mem: m, err: (*atomic.Uint32)(unsafe.Pointer(&b[0])), done: (*atomic.Uint64)(unsafe.Pointer(&b[8]))}, nil
}

// Err and Done are the words' device addresses, for a PushRegion.
func (w *PushWords) Err() cuda.DevicePtr  { return w.mem.Ptr() }
func (w *PushWords) Done() cuda.DevicePtr { return w.mem.Ptr() + 8 }

// Free releases the words; no kernel may use them any more.
func (w *PushWords) Free() error { return w.mem.Free() }

// Wait waits for the push kernel last launched on s for call seq (that is,
// with these words in its region) and reports whether it gave up waiting
// for a peer (the error word was set; Wait clears it, and the caller may
// launch the same call again). It polls the completion word, which the
// launch that completes the call sets to seq, for up to spin, and only
// then synchronizes s (at once when the error word is set, or when spin is
// 0): a synchronization returns some microseconds after the kernel's last
// store (coll/MEASUREMENTS.md, GPU collectives). When Wait returns false
// and no error, the call's stores to the memory of s's GPU are visible to
// that GPU's later work, its copies and its peers, and its stores to the
// peers' regions to those peers; the kernel itself may still be retiring,
// so work queued after it on s still runs after it. Where the call stored
// into another GPU's memory (an output that s's GPU reaches by peer
// access), pass spin 0: only the synchronization orders those stores. A
// kernel that faults never sets the word: the synchronization reports the
// fault.
func (w *PushWords) Wait(s *cuda.Stream, seq uint64, spin time.Duration) (gaveUp bool, err error) {
	if spin > 0 {
		var start time.Time
		for i := 0; ; i++ {
			if w.done.Load() == seq {
				return false, nil
			}
			if w.err.Load() != 0 {
				break
			}
			if i&255 == 0 {
				if i == 0 {
					start = time.Now()
				} else if time.Since(start) > spin {
					break
				}
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		return false, err
	}
	if w.err.Load() == 0 {
		if d := w.done.Load(); d != seq {
			// The kernel ended neither giving up nor completing the call:
			// its blocks' count was off (a call abandoned without the
			// reset of coll's push). Its results cannot be trusted.
			return false, fmt.Errorf("gpu: push kernel of call %d ended without completing it (completion word %d)", seq, d)
		}
		return false, nil
	}
	w.err.Store(0)
	return true, nil
}
