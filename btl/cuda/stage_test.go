package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
	drv "github.com/gorun/gorun/gpu/cuda"
)

// stageRec records each StageOp's end.
type stageRec struct {
	done map[*btl.StageOp]error
}

func (r *stageRec) StageDone(op *btl.StageOp, err error) {
	if _, twice := r.done[op]; twice {
		panic("StageDone twice")
	}
	r.done[op] = err
}

// TestStageBatch needs a GPU: windows of five staging copies of 4 KiB,
// device to host and host to device, whose middle one's device address is
// no allocation. The first copy of a window goes at once, the others are
// listed and go together at the next Progress, in one cuMemcpyBatchAsync
// where the driver has it (the bad one alone: a batch reads an unknown
// address as host memory). Only the bad copy fails, every other byte
// lands, each copy ends once, and nothing stays counted or listed.
func TestStageBatch(t *testing.T) {
	if ok, why := gpu.Available(); !ok {
		t.Skip("no GPU: " + why)
	}
	const n, k = 4096, 5
	mod, err := component{}.Open(btl.Env{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := mod.(*module)
	defer m.Close()
	buf, err := gpu.Alloc(0, gpu.Uint8, k*n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	src := make([]byte, k*n)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	if err := buf.CopyFromHost(src); err != nil {
		t.Fatal(err)
	}
	for _, toHost := range []bool{true, false} {
		rec := &stageRec{done: map[*btl.StageOp]error{}}
		ops := make([]*btl.StageOp, k)
		for i := range ops {
			ptr := uintptr(buf.DevicePtr()) + uintptr(i*n)
			if i == k/2 {
				ptr = 0xdead0000
			}
			h := m.HostBuffer(0, n) // pinned
			if !toHost {
				copy(h, src[i*n:(i+1)*n])
				for j := range h {
					h[j] ^= 0xff // the device gets other bytes than it holds
				}
			}
			ops[i] = &btl.StageOp{Dev: btl.DeviceMem(0, ptr, n), Host: h, ToHost: toHost, Owner: rec}
			if err := m.Stage(ops[i]); err != nil {
				if i != k/2 {
					t.Fatalf("stage %d: %v", i, err)
				}
				rec.done[ops[i]] = err // refused at once: alone, as the first of a window
			}
		}
		if len(m.queued) != k-1 {
			t.Errorf("%d copies listed; want %d (all but the first)", len(m.queued), k-1)
		}
		before := m.batched
		m.Progress()
		if drv.BatchCopies() {
			if batched := m.batched - before; batched != k-2 {
				t.Errorf("%d copies went in a batch; want %d (the listed ones but the bad one)", batched, k-2)
			}
		} else {
			t.Log("no cuMemcpyBatchAsync_v2 in this driver: the listed copies went one by one")
		}
		for len(rec.done) < k {
			m.Progress()
		}
		for i, op := range ops {
			err := rec.done[op]
			if (i == k/2) != (err != nil) {
				t.Errorf("copy %d (device to host %v): %v", i, toHost, err)
			}
			if i == k/2 || !toHost {
				continue
			}
			if !bytes.Equal(op.Host, src[i*n:(i+1)*n]) {
				t.Errorf("copy %d to host: wrong bytes", i)
			}
		}
		if !toHost {
			got := make([]byte, k*n)
			if err := buf.CopyToHost(got); err != nil {
				t.Fatal(err)
			}
			for i := range k {
				if i == k/2 {
					continue
				}
				for j := range n {
					if got[i*n+j] != src[i*n+j]^0xff {
						t.Fatalf("copy %d to the device: wrong byte at %d", i, j)
					}
				}
			}
		}
		for s, v := range m.out {
			if v != 0 {
				t.Errorf("stream %p: %d copies counted in flight after all ended", s, v)
			}
		}
		if len(m.queued) != 0 {
			t.Errorf("%d copies still listed after all ended", len(m.queued))
		}
		for _, op := range ops {
			m.ReleaseHost(op.Host)
		}
	}
}
