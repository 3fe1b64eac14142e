package mpi

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/coll"
)

// TestCartNeighborMatching simulates a NeighborAlltoall on every rank of
// many grids at once, without a network: each message is matched as p2p
// matches it (by source, destination and tag, in order of posting), and
// every rank must receive in block 2d the block its -1 neighbour of
// dimension d sent to its +1 neighbour, and in block 2d+1 the block its +1
// neighbour sent to its -1 neighbour (MPI-3 §7.6). Grids with periodic
// dimensions of size 1 and 2 make one rank a neighbour twice; 17
// dimensions of size 1 make the 31 channels repeat.
func TestCartNeighborMatching(t *testing.T) {
	type grid struct {
		dims    []int
		periods []bool
	}
	var grids []grid
	for _, dims := range [][]int{{1}, {2}, {3}, {4}, {6}, {1, 1}, {1, 2}, {2, 1}, {2, 2}, {2, 3}, {3, 2}, {1, 4}, {3, 1, 2}} {
		for mask := range 1 << len(dims) {
			p := make([]bool, len(dims))
			for i := range p {
				p[i] = mask&(1<<i) != 0
			}
			grids = append(grids, grid{dims, p})
		}
	}
	many := make([]int, 17)
	per := make([]bool, 17)
	for i := range many {
		many[i], per[i] = 1, true
	}
	grids = append(grids, grid{many, per}, grid{append(slices.Clone(many), 2), append(slices.Clone(per), true)})

	for _, g := range grids {
		t.Run(fmt.Sprintf("dims=%v/periods=%v", g.dims, g.periods), func(t *testing.T) {
			n := product(g.dims)
			nbs := make([]*neighborhood, n)
			for r := range n {
				topo := &cartTopo{dims: g.dims, periods: g.periods}
				topo.coords = topo.coordsOf(r)
				nbs[r] = cartNeighbors(topo)
			}
			// sent[key] are the messages on (from, to, channel) in send
			// order, each named by its sender and send block.
			type key struct{ from, to, ch int }
			type msg struct{ from, block int }
			sent := map[key][]msg{}
			for r, nb := range nbs {
				for i, dst := range nb.dst {
					if dst >= 0 {
						k := key{r, dst, nb.dstCh[i] % coll.NeighborChannels}
						sent[k] = append(sent[k], msg{r, i})
					}
				}
			}
			for r, nb := range nbs {
				topo := &cartTopo{dims: g.dims, periods: g.periods}
				topo.coords = topo.coordsOf(r)
				for i, src := range nb.src {
					d := i / 2
					minus, plus := topo.shift(d, 1)
					want := msg{minus, 2*d + 1}
					if i%2 == 1 {
						want = msg{plus, 2 * d}
					}
					if src < 0 {
						if want.from != ProcNull {
							t.Fatalf("rank %d block %d: no source, MPI says %d", r, i, want.from)
						}
						continue
					}
					k := key{src, r, nb.srcCh[i] % coll.NeighborChannels}
					q := sent[k]
					if len(q) == 0 {
						t.Fatalf("rank %d block %d: receive from %d on channel %d matches no message", r, i, src, k.ch)
					}
					if q[0] != want {
						t.Fatalf("rank %d block %d: got rank %d's block %d, want rank %d's block %d", r, i, q[0].from, q[0].block, want.from, want.block)
					}
					sent[k] = q[1:]
				}
			}
			for k, q := range sent {
				if len(q) > 0 {
					t.Fatalf("%d messages from %d to %d on channel %d never received", len(q), k.from, k.to, k.ch)
				}
			}
		})
	}
}
