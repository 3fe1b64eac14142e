package coll

import (
	"strings"
	"testing"

	"github.com/gorun/gorun/gpu"
)

// byteFirst is a non-commutative stand-in (only Commutative matters here).
type byteFirst struct{}

func (byteFirst) Apply(in, inout []byte) {}
func (byteFirst) Commutative() bool      { return false }

// TestPickMemo: a remembered pick (pick's memo in shared.picks) is always
// the choice made afresh (choose), whatever the order of the calls: a
// walk in which each call differs from the one before in one input alone
// (the size, across the tables' and the shared-memory slot's bounds, up
// and down; the override; the operation's commutativity; blocking or
// not), on one host and on two, and never taken on a view of part of the
// communicator (other ranks, other nodes). Leaving any of those inputs
// out of pickKey's key fails it.
func TestPickMemo(t *testing.T) {
	type call struct {
		size   int
		forced bool // the last algorithm forced
		op     Op
		nb     bool
	}
	sizes := []int{0, 8, 100, 2048, 4096, 65536, 65537, 1 << 20, 8, 1 << 20, 0}
	send, recv := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, hosts := range [][]string{nil, {"a", "a", "b", "b", "a", "b", "a", "b"}} {
		c := NewComm(nil, 7, []int{0, 1, 2, 3, 4, 5, 6, 7}, 2, hosts)
		sub := c.sub([]int{0, 2, 4, 6}, 1)
		for _, k := range []*collective{collAllreduce, collBcast, collReduce, collAllgather, collAlltoall, collBarrier, collScan,
			collGPUAllreduce, collGPUBcast, collGPUReduce, collGPUAllgather, collGPUReduceScatterBlock} {
			last := k.algs[len(k.algs)-1].name
			for _, size := range sizes {
				base := call{size: size, op: byteMax{}}
				for _, cl := range []call{base, {size, true, byteMax{}, false}, base, {size, false, byteFirst{}, false}, base, {size, false, byteMax{}, true}, base} {
					forced := ""
					if cl.forced {
						forced = last
					}
					if err := SetAlgorithm(k.name, forced); err != nil {
						t.Fatal(err)
					}
					a := Args{Op: cl.op, Elem: 1, Nonblocking: cl.nb, Recv: recv[:size], Send: send[:size]}
					if k == collAllgather {
						a.Send = a.Send[:size/8]
					}
					if strings.HasPrefix(k.name, "gpu_") { // device buffers: made-up addresses, never touched
						a.Send, a.Recv = nil, nil
						a.RecvD, a.SendD = gpu.Wrap(0, 0x10000, gpu.Uint8, size), gpu.Wrap(0, 0x20000, gpu.Uint8, size)
						a.Counts = []int{size / 8}
					}
					for _, v := range []*Comm{&c, sub} {
						got := k.pick(v, &a)
						want := k.choose(v, &a, k.size(v, &a), int(k.forcedOf(&a))-1)
						if got != want {
							t.Fatalf("%s hosts=%v forced=%q size %d commutative=%v nonblocking=%v view of %d: pick %s, afresh %s",
								k.name, hosts, forced, size, cl.op.Commutative(), cl.nb, len(v.World), k.algs[got].name, k.algs[want].name)
						}
					}
				}
			}
			SetAlgorithm(k.name, "")
		}
		// Across the shared-memory set-up: a pick remembered before it
		// (the least slot) is dropped once the segment's slot is known.
		if hosts == nil {
			for _, k := range []*collective{collBcast, collAlltoall} {
				a := Args{Recv: recv[:128<<10], Send: send[:128<<10]}
				before := k.pick(&c, &a)
				c.shmSetDone(&shmSeg{n: 8, slot: 1 << 20})
				got, want := k.pick(&c, &a), k.choose(&c, &a, k.size(&c, &a), -1)
				if got != want || k.algs[got].name != "shm" || k.algs[before].name == "shm" {
					t.Errorf("%s of 128 KiB: pick %s before the set-up, %s after (afresh %s); want shm after only", k.name, k.algs[before].name, k.algs[got].name, k.algs[want].name)
				}
				c.sh.shm.seg.Store(nil)
				c.sh.shm.tried.Store(false)
				c.sh.forgetPicks()
			}
		}
		if _, memo := collAllreduce.pickKey(sub, &Args{Recv: make([]byte, 8)}, 8, 0); memo {
			t.Errorf("hosts=%v: a view of part of the communicator is memoized", hosts)
		}
		if _, memo := collAllreduce.pickKey(&c, &Args{Recv: make([]byte, 8)}, 8, 0); !memo {
			t.Errorf("hosts=%v: the whole communicator is not memoized", hosts)
		}
	}
	SetAlgorithm("allreduce", "")
}

// TestOverridesSnapshot: a call that took the overrides of its start
// (Args.Forced, a nonblocking one) keeps them across a later SetAlgorithm;
// others see the one in force.
func TestOverridesSnapshot(t *testing.T) {
	k := collAllreduce
	before := Args{Forced: Overrides()}
	if err := SetAlgorithm(k.name, k.algs[0].name); err != nil {
		t.Fatal(err)
	}
	defer SetAlgorithm(k.name, "")
	if f := k.forcedOf(&before); f != 0 {
		t.Errorf("snapshot before SetAlgorithm: override %d, want none", f)
	}
	after := Args{Forced: Overrides()}
	if f, g := k.forcedOf(&after), k.forcedOf(&Args{}); f != 1 || g != 1 {
		t.Errorf("after SetAlgorithm: snapshot %d, in force %d, want 1 and 1", f, g)
	}
}
