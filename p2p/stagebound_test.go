package p2p

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"testing"

	"github.com/gorun/gorun/btl"
)

// fakeStager is a GPU transport without a GPU, for the staging pipeline's
// bookkeeping: "device memory" is a host slice at a made-up address,
// copies are queued by Stage and done by the next Progress (as the copy
// engines' events are), and every Stage of a chunk to host memory checks
// the engine's bytes in flight against the bound.
type fakeStager struct {
	e        *Engine
	chunk    int
	base     uintptr
	dev      []byte
	pending  []*btl.StageOp
	maxOut   int // the largest stageOut seen at a chunk's Stage
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
	}
	f.pending = append(f.pending, op)
	return nil
}

func (f *fakeStager) Progress() int {
	ops := f.pending
	f.pending = nil
	for _, op := range ops {
		off := int(op.Dev.Ptr - f.base)
		d := f.dev[off : off+op.Dev.N]
		if op.ToHost {
			copy(op.Host, d)
		} else {
			copy(d, op.Host)
		}
		op.Owner.StageDone(op, nil)
	}
	return len(ops)
}

// TestStageBound: rank 0 sends a window of large messages from (fake)
// device memory over tcp, staged in 64 KiB chunks under a bound of 128
// KiB, then of 64 KiB (below two chunks: two chunks still overlap); rank 1
// receives them into host memory. Every byte arrives, the bytes in flight
// never pass the bound (two chunks at least) and do reach two chunks,
// later sends did wait for earlier ones' chunks, and the count is back to
// zero at the end.
func TestStageBound(t *testing.T) {
	for _, bound := range []int{128 << 10, 64 << 10} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) { stageBound(t, bound) })
	}
}

func stageBound(t *testing.T, bound int) {
	const np, chunk, k, size = 2, 64 << 10, 6, 300<<10 + 1
	job := fmt.Sprintf("p2pstage%d-%d", os.Getpid(), jobSeq.Add(1))
	secret := make([]byte, 32)
	rand.Read(secret)
	f, err := btl.ParseFilter("tcp")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{}
	var fakes []*fakeStager
	mods := make([][]btl.Module, np)
	for r := range np {
		e := Alloc(r, np)
		e.stageMax = bound
		ms, skipped, err := btl.OpenAll(btl.Env{Rank: r, Size: np, JobID: job, HostID: hostID, Secret: secret, Handler: Handler(e)}, f)
		if err != nil {
			t.Fatalf("rank %d: open tcp: %v (%v)", r, err, skipped)
		}
		fk := &fakeStager{e: e, chunk: chunk, base: 0x10000, dev: make([]byte, k*size)}
		fakes = append(fakes, fk)
		mods[r] = append(ms, fk)
		w.engs = append(w.engs, e)
	}
	t.Cleanup(func() {
		for _, e := range w.engs {
			e.Close()
		}
	})
	peers := make([]btl.Peer, np)
	for r := range peers {
		peers[r] = btl.Peer{Rank: r, HostID: hostID, PID: os.Getpid(), Addrs: map[string][]byte{"tcp": mods[r][0].Address()}}
	}
	for r, e := range w.engs {
		if err := e.Attach(mods[r], peers); err != nil {
			t.Fatal(err)
		}
	}
	src := fakes[0]
	for i := range k {
		copy(src.dev[i*size:], pattern(i, size))
	}
	got := make([][]byte, k)
	w.within(t, func() {
		e := w.engs[0]
		var rs []*Request
		for i := range k {
			r, err := e.IsendMem(1, 1, i, btl.DeviceMem(0, src.base+uintptr(i*size), size), false)
			if err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			rs = append(rs, r)
		}
		e.WaitAll(rs)
		for i, r := range rs {
			if _, err := r.Wait(); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		}
	}, func() {
		e := w.engs[1]
		var rs []*Request
		for i := range k {
			got[i] = make([]byte, size)
			r, err := e.Irecv(1, 0, i, got[i])
			if err != nil {
				t.Errorf("receive %d: %v", i, err)
				return
			}
			rs = append(rs, r)
		}
		e.WaitAll(rs)
		for i, r := range rs {
			if _, err := r.Wait(); err != nil {
				t.Errorf("receive %d: %v", i, err)
			}
		}
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
	if out := w.engs[0].stageOut; out != 0 {
		t.Errorf("%d bytes still counted in flight after every send completed", out)
	}
}
