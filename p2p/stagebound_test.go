package p2p

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/btl"
)

// fakeStager is a GPU transport without a GPU, for the staging pipeline's
// bookkeeping: "device memory" is a host slice at a made-up address,
// copies are queued by Stage and done by the next Progress (as the copy
// engines' events are), and every Stage of a chunk to host memory checks
// the engine's bytes in flight against the bound.
type fakeStager struct {
	e       *Engine
	chunk   int
	base    uintptr
	dev     []byte
	pending []*btl.StageOp
	// hold, while true, keeps copies to host memory pending (a GPU that
	// has not finished them); Progress runs the others.
	hold   bool
	maxOut int // the largest stageOut seen at a chunk's Stage
	// starts are the device offsets of the chunks copied to host memory,
	// in the order their copies started.
	starts   []int
	queued   bool
	overflow error
}

func (f *fakeStager) Name() string                         { return "fakegpu" }
func (f *fakeStager) Caps() btl.Caps                       { return btl.Caps{} }
func (f *fakeStager) Address() []byte                      { return nil }
func (f *fakeStager) Reach(btl.Peer) (btl.Endpoint, error) { return nil, nil }
func (f *fakeStager) Close() error                         { return nil }
func (f *fakeStager) StageKinds() btl.Kinds                { return btl.KindsOf(btl.MemDevice) }
func (f *fakeStager) HostBuffer(dev, n int) []byte         { return make([]byte, n) }
func (f *fakeStager) ReleaseHost([]byte)                   {}
func (f *fakeStager) StageChunk() int                      { return f.chunk }
func (f *fakeStager) Busy() bool                           { return len(f.pending) > 0 }

// Stage runs with the engine lock held (pump): stageOut already counts op.
func (f *fakeStager) Stage(op *btl.StageOp) error {
	if op.ToHost && !op.Eager {
		e := f.e
		f.maxOut = max(f.maxOut, e.stageOut)
		if bound := max(e.stageMax, 2*f.chunk); e.stageOut > bound && f.overflow == nil {
			f.overflow = fmt.Errorf("%d bytes of staged chunks in flight, bound %d", e.stageOut, bound)
		}
		f.queued = f.queued || len(e.stageQ) > 0
		f.starts = append(f.starts, int(op.Dev.Ptr-f.base))
	}
	f.pending = append(f.pending, op)
	return nil
}

func (f *fakeStager) Progress() int {
	ops := f.pending
	f.pending = nil
	n := 0
	for _, op := range ops {
		if f.hold && op.ToHost {
			f.pending = append(f.pending, op)
			continue
		}
		n++
		off := int(op.Dev.Ptr - f.base)
		d := f.dev[off : off+op.Dev.N]
		if op.ToHost {
			copy(op.Host, d)
		} else {
			copy(d, op.Host)
		}
		op.Owner.StageDone(op, nil)
	}
	return n
}

// TestStageBound: rank 0 sends a window of large messages from (fake)
// device memory over tcp, staged in 64 KiB chunks under a bound of 128
// KiB, then of 64 KiB (below two chunks: two chunks still overlap); rank 1
// receives them into host memory. Every byte arrives, the bytes in flight
// never pass the bound (two chunks at least) and do reach two chunks,
// later sends did wait for earlier ones' chunks and started in the order
// they were sent (the queue resumes the oldest first), and the count is
// back to zero at the end.
func TestStageBound(t *testing.T) {
	for _, bound := range []int{128 << 10, 64 << 10} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) { stageBound(t, bound) })
	}
}

func stageBound(t *testing.T, bound int) {
	const chunk, k, size = 64 << 10, 6, 300<<10 + 1
	var fakes []*fakeStager
	w := openWorld(t, setup{name: "tcp", btl: "tcp",
		env: map[string]string{"GORUN_P2P_STAGE_INFLIGHT": fmt.Sprint(bound)},
		extra: func(_ int, e *Engine) btl.Module {
			fk := &fakeStager{e: e, chunk: chunk, base: 0x10000, dev: make([]byte, k*size)}
			fakes = append(fakes, fk)
			return fk
		}})
	src := fakes[0]
	for i := range k {
		copy(src.dev[i*size:], pattern(i, size))
	}
	got := make([][]byte, k)
	w.within(t, func() {
		startAll(t, w.engs[0], "send", k, func(i int) (*Request, error) {
			return w.engs[0].IsendMem(1, 1, i, btl.DeviceMem(0, src.base+uintptr(i*size), size), false)
		})
	}, func() {
		startAll(t, w.engs[1], "receive", k, func(i int) (*Request, error) {
			got[i] = make([]byte, size)
			return w.engs[1].Irecv(1, 0, i, got[i])
		})
	})
	for i := range k {
		if !bytes.Equal(got[i], pattern(i, size)) {
			t.Errorf("message %d: wrong bytes", i)
		}
	}
	if src.overflow != nil {
		t.Error(src.overflow)
	}
	if !src.queued {
		t.Error("no send waited behind the bound: the test does not reach it")
	}
	if src.maxOut < 2*chunk {
		t.Errorf("at most %d bytes in flight: two chunks (%d) never overlapped", src.maxOut, 2*chunk)
	}
	var firsts []int // the messages, in the order their first chunks started
	for _, off := range src.starts {
		if off%size == 0 {
			firsts = append(firsts, off/size)
		}
	}
	if !slices.IsSorted(firsts) || len(firsts) != k {
		t.Errorf("messages started in the order %v; want 0 to %d in order", firsts, k-1)
	}
	if out := w.engs[0].stageOut; out != 0 {
		t.Errorf("%d bytes still counted in flight after every send completed", out)
	}
}

// TestStageReleaseOnPeerFailure: rank 0 stages two large device messages
// to rank 1 under a bound of two chunks, whose copies the (fake) GPU holds:
// the first message's two chunks fill the bound and the second message
// waits behind it. Rank 1 is then declared failed (the failure detector's
// verdict, Engine.PeerFailed): at once no byte stays counted and no send
// stays queued, so that staged sends to other peers are not held up by a
// peer that will never take its chunks; the queued message fails at once,
// the other when the copies of its own end (they read the user's buffer),
// with ErrProcFailed; and those copies ending later give back nothing
// twice.
func TestStageReleaseOnPeerFailure(t *testing.T) {
	const chunk, k, size = 64 << 10, 2, 300 << 10
	var fakes []*fakeStager
	w := openWorld(t, setup{name: "tcp", btl: "tcp",
		env: map[string]string{"GORUN_P2P_STAGE_INFLIGHT": fmt.Sprint(2 * chunk)},
		extra: func(_ int, e *Engine) btl.Module {
			fk := &fakeStager{e: e, chunk: chunk, base: 0x10000, dev: make([]byte, k*size), hold: true}
			fakes = append(fakes, fk)
			return fk
		}})
	e0, e1, src := w.engs[0], w.engs[1], fakes[0]
	failed := make(chan struct{})
	errDown := errors.New("rank 1 declared failed by the test")
	locked := func(f func()) { e0.mu.Lock(); f(); e0.mu.Unlock() }
	w.within(t, func() {
		sends := make([]*Request, k)
		for i := range k {
			var err error
			if sends[i], err = e0.IsendMem(1, 1, i, btl.DeviceMem(0, src.base+uintptr(i*size), size), false); err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
		}
		// Until the bound is full and the second message waits behind it.
		e0.until(func() bool { return e0.stageOut >= 2*chunk && len(e0.stageQ) > 0 })
		e0.PeerFailed(1, errDown)
		close(failed)
		locked(func() {
			if e0.stageOut != 0 || len(e0.stageQ) != 0 {
				t.Errorf("after the peer failed: %d bytes counted in flight, %d sends queued; want none", e0.stageOut, len(e0.stageQ))
			}
		})
		if done, _, err := sends[1].Test(); !done || !errors.Is(err, ErrProcFailed) {
			t.Errorf("queued send after its peer failed: done %v, error %v; want done with ErrProcFailed", done, err)
		}
		if done, _, _ := sends[0].Test(); done {
			t.Error("a send completed while copies from its buffer were still running")
		}
		locked(func() { src.hold = false })
		if _, err := sends[0].Wait(); !errors.Is(err, ErrProcFailed) || !errors.Is(err, errDown) {
			t.Errorf("send whose peer failed: %v; want ErrProcFailed wrapping the verdict", err)
		}
		locked(func() {
			if e0.stageOut != 0 || len(e0.stageSends) != 0 {
				t.Errorf("after the held copies ended: %d bytes counted in flight (given back twice?), %d sends under way; want none",
					e0.stageOut, len(e0.stageSends))
			}
		})
	}, func() {
		recvs := make([]*Request, k)
		for i := range k {
			var err error
			if recvs[i], err = e1.Irecv(1, 0, i, make([]byte, size)); err != nil {
				t.Errorf("receive %d: %v", i, err)
				return
			}
		}
		e1.until(func() bool {
			select {
			case <-failed:
				return true
			default:
				return false
			}
		})
		e1.PeerFailed(0, errors.New("rank 0 declared failed by the test"))
		for i, r := range recvs {
			if _, err := r.Wait(); err == nil {
				t.Errorf("receive %d of a message that never came succeeded", i)
			}
		}
	})
}
