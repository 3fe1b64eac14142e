package coll

import "testing"

// byteFirst is a non-commutative stand-in (only Commutative matters here).
type byteFirst struct{}

func (byteFirst) Apply(in, inout []byte) {}
func (byteFirst) Commutative() bool      { return false }

// TestPickMemo: a remembered pick (pick's memo in shared.picks) is always
// the choice made afresh (choose), whatever the order of the calls: sizes
// up and down across the tables' and the shared-memory slot's bounds,
// commutative or not, blocking or not, an override set and cleared, on
// one host and on two, and never taken on a view of part of the
// communicator (other ranks, other nodes). Removing the key's size or
// override from pickKey fails it.
func TestPickMemo(t *testing.T) {
	sizes := []int{0, 8, 100, 2048, 4096, 65536, 65537, 1 << 20, 8, 1 << 20, 0}
	send, recv := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, hosts := range [][]string{nil, {"a", "a", "b", "b", "a", "b", "a", "b"}} {
		c := NewComm(nil, 7, []int{0, 1, 2, 3, 4, 5, 6, 7}, 2, hosts)
		sub := c.sub([]int{0, 2, 4, 6}, 1)
		for _, k := range []*collective{collAllreduce, collBcast, collReduce, collAllgather, collBarrier, collScan} {
			// Consecutive calls differ by the override alone, or by the
			// size alone (forced innermost, then sizes).
			for round := range 2 {
				for _, op := range []Op{byteMax{}, byteFirst{}} {
					for _, nb := range []bool{false, true} {
						for _, size := range sizes {
							for _, forced := range []string{"", k.algs[len(k.algs)-1].name, ""} {
								if err := SetAlgorithm(k.name, forced); err != nil {
									t.Fatal(err)
								}
								a := Args{Op: op, Elem: 1, Nonblocking: nb, Recv: recv[:size], Send: send[:size]}
								if k == collAllgather {
									a.Send = a.Send[:size/8]
								}
								for _, v := range []*Comm{&c, sub} {
									got := k.pick(v, &a)
									want := k.choose(v, &a, k.size(v, &a), int(k.forced.Load())-1)
									if got != want {
										t.Fatalf("%s hosts=%v forced=%q round %d size %d commutative=%v nonblocking=%v view of %d: pick %s, afresh %s",
											k.name, hosts, forced, round, size, op.Commutative(), nb, len(v.World), k.algs[got].name, k.algs[want].name)
									}
								}
							}
						}
					}
				}
			}
			SetAlgorithm(k.name, "")
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
