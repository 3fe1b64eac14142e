package coll

import (
	"fmt"
	"slices"
	"testing"
)

// The schedules are checked by simulating every rank at once: a block's
// value is the sum of 1<<rank over the ranks whose contribution it holds,
// so a missing or doubled contribution shows.

// simulate runs one schedule per rank in lock step on nblocks blocks per
// rank, starting from init(rank, block), and returns every rank's blocks.
// It fails the test if a step's sends and receives do not pair up.
func simulate(t *testing.T, scheds [][]step, nblocks int, init func(r, b int) int64) [][]int64 {
	t.Helper()
	n := len(scheds)
	data := make([][]int64, n)
	for r := range data {
		data[r] = make([]int64, nblocks)
		for b := range nblocks {
			data[r][b] = init(r, b)
		}
	}
	steps := 0
	for _, s := range scheds {
		steps = max(steps, len(s))
	}
	for k := range steps {
		next := make([][]int64, n)
		for r := range n {
			next[r] = slices.Clone(data[r])
		}
		for r := range n {
			if k >= len(scheds[r]) {
				continue
			}
			s := scheds[r][k]
			if s.From < 0 {
				continue
			}
			if s.From >= n || k >= len(scheds[s.From]) {
				t.Fatalf("step %d: rank %d receives from %d, which has no such step", k, r, s.From)
			}
			p := scheds[s.From][k]
			if p.To != r || p.SendLo != s.RecvLo || p.SendHi != s.RecvHi {
				t.Fatalf("step %d: rank %d expects blocks [%d,%d) from %d, which sends [%d,%d) to %d", k, r, s.RecvLo, s.RecvHi, s.From, p.SendLo, p.SendHi, p.To)
			}
			for b := s.RecvLo; b < s.RecvHi; b++ {
				if s.Reduce {
					next[r][b] += data[s.From][b]
				} else {
					next[r][b] = data[s.From][b]
				}
			}
		}
		for r := range n {
			if k < len(scheds[r]) {
				if s := scheds[r][k]; s.To >= 0 {
					q := scheds[s.To][k]
					if q.From != r {
						t.Fatalf("step %d: rank %d sends to %d, which receives from %d", k, r, s.To, q.From)
					}
				}
			}
		}
		data = next
	}
	return data
}

func all(n int) int64 { return 1<<n - 1 }

func TestRingAllreduceSchedule(t *testing.T) {
	for n := 1; n <= 9; n++ {
		var rs, ag [][]step
		for r := range n {
			rs = append(rs, ringReduceScatter(r, n, 0))
			ag = append(ag, ringAllgather(r, n, 1))
		}
		d := simulate(t, rs, n, func(r, _ int) int64 { return 1 << r })
		for r := range n {
			if got := d[r][(r+1)%n]; got != all(n) {
				t.Fatalf("n=%d: after the reduce-scatter rank %d holds %b in block %d", n, r, got, (r+1)%n)
			}
		}
		// The allgather copies whatever the owners hold.
		d = simulate(t, ag, n, func(r, b int) int64 {
			if b == (r+1)%n {
				return all(n)
			}
			return -1
		})
		for r := range n {
			for b := range n {
				if d[r][b] != all(n) {
					t.Fatalf("n=%d: after the allgather rank %d block %d = %d", n, r, b, d[r][b])
				}
			}
		}
	}
}

func TestRingReduceScatterShift(t *testing.T) {
	for n := 1; n <= 9; n++ {
		var rs [][]step
		for r := range n {
			rs = append(rs, ringReduceScatter(r, n, 1))
		}
		d := simulate(t, rs, n, func(r, _ int) int64 { return 1 << r })
		for r := range n {
			if d[r][r] != all(n) {
				t.Fatalf("n=%d: rank %d holds %b in its own block", n, r, d[r][r])
			}
		}
	}
}

func TestRecursiveHalvingDoubling(t *testing.T) {
	for n := 1; n <= 17; n++ {
		f := newFold(n)
		// Core members only, addressed by real rank.
		scheds := make([][]step, n)
		for r := range n {
			if v := f.vrank(r); v >= 0 {
				scheds[r] = f.halving(v)
			}
		}
		d := simulate(t, scheds, f.p, func(r, _ int) int64 {
			if f.vrank(r) < 0 {
				return 0
			}
			return 1 << r
		})
		var core int64
		for r := range n {
			if f.vrank(r) >= 0 {
				core |= 1 << r
			}
		}
		for r := range n {
			if v := f.vrank(r); v >= 0 && d[r][v] != core {
				t.Fatalf("n=%d: core member %d (rank %d) holds %b in block %d, want %b", n, v, r, d[r][v], v, core)
			}
		}
		for r := range n {
			if v := f.vrank(r); v >= 0 {
				scheds[r] = f.doubling(v)
			}
		}
		d = simulate(t, scheds, f.p, func(r, b int) int64 {
			if v := f.vrank(r); v >= 0 && b == v {
				return int64(100 + b)
			}
			return -1
		})
		for r := range n {
			if f.vrank(r) < 0 {
				continue
			}
			for b := range f.p {
				if d[r][b] != int64(100+b) {
					t.Fatalf("n=%d: after doubling rank %d block %d = %d", n, r, b, d[r][b])
				}
			}
		}
		// fold and real are inverse.
		for v := range f.p {
			if f.vrank(f.real(v)) != v {
				t.Fatalf("n=%d: vrank(real(%d)) = %d", n, v, f.vrank(f.real(v)))
			}
		}
	}
}

func TestBinomialTree(t *testing.T) {
	for n := 1; n <= 33; n++ {
		for root := 0; root < n; root += max(1, n/3) {
			trees := make([]binomial, n)
			for r := range n {
				trees[r] = newBinomial(r, n, root)
			}
			for r := range n {
				b := trees[r]
				if (b.parent < 0) != (r == root) {
					t.Fatalf("n=%d root=%d: rank %d has parent %d", n, root, r, b.parent)
				}
				size := 1
				for i := len(b.children) - 1; i >= 0; i-- {
					ch := b.children[i]
					if trees[ch].parent != r {
						t.Fatalf("n=%d root=%d: child %d of %d has parent %d", n, root, ch, r, trees[ch].parent)
					}
					if trees[ch].mySize != b.subtree[i] {
						t.Fatalf("n=%d root=%d: child %d's subtree %d, parent thinks %d", n, root, ch, trees[ch].mySize, b.subtree[i])
					}
					if mod(ch-root, n) != b.rel+size {
						t.Fatalf("n=%d root=%d: child %d of %d is not next in relative order", n, root, ch, r)
					}
					size += b.subtree[i]
				}
				// Children are listed largest subtree first, so their
				// ranges are consecutive in reverse order.
				if size != b.mySize {
					t.Fatalf("n=%d root=%d: rank %d subtree %d, children add to %d", n, root, r, b.mySize, size)
				}
			}
		}
	}
}

func TestBlocks(t *testing.T) {
	for _, tc := range []struct{ total, n, elem int }{{0, 3, 4}, {4, 3, 4}, {40, 3, 4}, {1 << 20, 7, 8}, {12, 5, 1}} {
		counts, displs := blocks(tc.total, tc.n, tc.elem)
		off := 0
		for i := range counts {
			if displs[i] != off || counts[i]%tc.elem != 0 {
				t.Fatalf("%+v: block %d at %d of %d", tc, i, displs[i], counts[i])
			}
			if counts[i] > counts[0] {
				t.Fatalf("%+v: block %d larger than block 0", tc, i)
			}
			off += counts[i]
		}
		if off != tc.total-tc.total%tc.elem {
			t.Fatalf("%+v: blocks cover %d", tc, off)
		}
	}
}

// TestBruck simulates the Bruck allgather's index bookkeeping.
func TestBruck(t *testing.T) {
	for n := 1; n <= 13; n++ {
		have := make([][]int, n) // rank -> rotated list of owners
		for r := range n {
			have[r] = []int{r}
		}
		dist, count := bruckSteps(n)
		for k, d := range dist {
			next := make([][]int, n)
			for r := range n {
				from := (r + d) % n
				next[r] = append(slices.Clone(have[r]), have[from][:count[k]]...)
			}
			have = next
		}
		for r := range n {
			for i := range n {
				if have[r][i] != (r+i)%n {
					t.Fatalf("n=%d: rank %d slot %d holds %d", n, r, i, have[r][i])
				}
			}
		}
	}
}

// TestAlltoallBruck runs the Bruck alltoall's rotations and rounds on
// labels (sender, destination).
func TestAlltoallBruck(t *testing.T) {
	for n := 1; n <= 13; n++ {
		tmp := make([][][2]int, n)
		for me := range n {
			tmp[me] = make([][2]int, n)
			for i := range n {
				tmp[me][i] = [2]int{me, (me + i) % n}
			}
		}
		for d := 1; d < n; d <<= 1 {
			next := make([][][2]int, n)
			for me := range n {
				next[me] = slices.Clone(tmp[me])
				src := mod(me-d, n)
				for i := range n {
					if i&d != 0 {
						next[me][i] = tmp[src][i]
					}
				}
			}
			tmp = next
		}
		for me := range n {
			for i := range n {
				r := mod(me-i, n)
				if got := tmp[me][i]; got != [2]int{r, me} {
					t.Fatalf("n=%d: rank %d slot %d (for sender %d) holds %v", n, me, i, r, got)
				}
			}
		}
	}
}

func TestPairwise(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for r := range n {
			to, from := pairwise(r, n)
			for k := range to {
				_, pf := pairwise(to[k], n)
				if pf[k] != r {
					t.Fatalf("n=%d: step %d rank %d sends to %d, which receives from %d", n, k, r, to[k], pf[k])
				}
			}
			seen := map[int]bool{}
			for _, x := range from {
				seen[x] = true
			}
			if len(seen) != n-1 || seen[r] {
				t.Fatalf("n=%d: rank %d receives from %v", n, r, from)
			}
		}
	}
}

func TestSegSize(t *testing.T) {
	for _, tc := range []struct{ def, elem, env, want int }{
		{64 << 10, 4, 0, 64 << 10}, {64 << 10, 12, 0, 65532}, {100, 8, 0, 96}, {64, 16, 1, 16}, {64 << 10, 4, 30, 28},
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			if tc.env > 0 {
				t.Setenv("GORUN_COLL_SEGSIZE", fmt.Sprint(tc.env))
			}
			if got := segSize(tc.def, tc.elem); got != tc.want {
				t.Fatalf("segSize(%d, %d) = %d, want %d", tc.def, tc.elem, got, tc.want)
			}
		})
	}
}

func TestHierSplit(t *testing.T) {
	hosts := []string{"a", "b", "a", "c", "b", "a"}
	c := NewComm(nil, 1, []int{0, 1, 2, 3, 4, 5}, 2, hosts)
	if c.Nodes != 3 || !slices.Equal(c.Node, []int{0, 1, 0, 2, 1, 0}) {
		t.Fatalf("nodes %d %v", c.Nodes, c.Node)
	}
	h := c.hier(4) // root on node 1
	if !slices.Equal(h.local.World, []int{0, 2, 5}) || h.local.Me != 1 || h.leaders != nil {
		t.Fatalf("local %v me %d leaders %v", h.local.World, h.local.Me, h.leaders)
	}
	c.Me = 0
	h = c.hier(4)
	if h.leaders == nil || !slices.Equal(h.leaders.World, []int{0, 4, 3}) || h.rootLeader != 1 || h.leaders.Me != 0 {
		t.Fatalf("leaders %+v root leader %d", h.leaders, h.rootLeader)
	}
}
