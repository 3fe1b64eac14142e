package coll

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorun/gorun/internal/params"
)

// The fan-in tree of the shared-memory reduce and allreduce on many
// ranks. The owners' reduction makes one rank read every rank's lines: n
// cache-line transfers in a row, each a miss that crosses cores, which
// made allreduce of 8 B take 5.6 µs at np=32 on the 32-core host against
// Open MPI's 3.8, once the scheduling noise of nap.Yield's comment was
// gone; the tree takes 3.4 (coll/MEASUREMENTS.md). In the tree, groups of
// radix ranks (contiguous, so that folding stays in rank order) are read
// by their first rank, the leaders of radix groups by theirs, and so on;
// rank 0 ends the last level and releases everyone through the header
// line. Each level costs about radix transfers, and the groups of one
// level run at once.
//
// A rank that leads level l waits for its members' level l-1 (level 0 is
// "entered the call", the ready line), folds their partial results in
// rank order, and stores s in word l of its done line. The partial result
// of the group that rank L leads at level l is in the buffer of the
// group's last rank: as in reduce, folding writes each step's result into
// the next operand's buffer (Apply(acc, b) sets b = acc ⊕ b), so the
// whole result ends in rank n-1's buffer. Rank 0 leads every level; after
// the last it stores s in the header line's first word (the release),
// which every rank that needs the result polls: one line written once per
// call, where rank 0's done line changes once per level.
//
// The barrier stays flat (every rank reads every ready line): on the
// 32-core host its reads run in parallel and it took 2.0 µs at np=32
// against the tree's 2.5-3.2 and Open MPI's 3.15 (coll/MEASUREMENTS.md).
//
// Every member's length is checked against the leader's, at every level,
// so that a mismatch fails at some leader (and through its abort at every
// rank) rather than folding buffers of different lengths.

var (
	pShmRadix = params.Int("GORUN_COLL_SHM_RADIX", 4,
		"fan-in of the shared-memory reduction tree (reduce and allreduce from GORUN_COLL_SHM_TREE ranks on): each leader reads this many ranks' lines per level")
	pShmTree = params.Int("GORUN_COLL_SHM_TREE", 9,
		"shared-memory reduce and allreduce on at least this many ranks fold through the fan-in tree (GORUN_COLL_SHM_RADIX); fewer ranks: every rank reads all contributions (small buffers) or owners fold segments; 0: never")
	pShmTreeMax = params.Int("GORUN_COLL_SHM_TREE_MAX", 2048,
		"largest message in bytes that the shared-memory reduce and allreduce fold through the tree (from GORUN_COLL_SHM_TREE ranks on); above, owners fold segments of every rank's buffer")
	shmTree = sync.OnceValue(func() treeParams {
		return treeParams{from: pShmTree(), radix: max(pShmRadix(), 2), most: pShmTreeMax()}
	})
)

// treeParams are the tree's parameters, read once.
type treeParams struct{ from, radix, most int }

// treeLevels is the deepest level word of a done line (words 1..6; word 0
// is reduce's owners', word 7 the barrier's rounds: dissWord).
const treeLevels = 6

// useTree reports whether a reduction of m bytes on n ranks runs through
// the tree.
func useTree(n, m int) bool {
	p := shmTree()
	return p.from > 0 && n >= p.from && m <= p.most
}

// treeRadix is the radix for n ranks (shmSeg.radix, set once per
// segment): the parameter, raised where the tree would be deeper than a
// done line has words.
func treeRadix(n int) int {
	k := shmTree().radix
	for span := pow(k, treeLevels); span < n; span = pow(k, treeLevels) {
		k++
	}
	return k
}

func pow(k, e int) int {
	p := 1
	for range e {
		p *= k
		if p >= 1<<30 {
			break
		}
	}
	return p
}

// level returns rank r's done word for level l.
func (g *shmSeg) level(r, l int) *uint64 { return g.word(r, line+8*l) }

// release is the header line's word that rank 0 sets to s when the tree of
// call s is complete.
func (g *shmSeg) release() *uint64 { return (*uint64)(unsafe.Pointer(&g.mem[0])) }

// fanIn runs the levels this rank leads, folding m bytes of its members'
// buffers in rank order; at rank 0 it ends with the release.
func (k *shmCall) fanIn(a *Args, m int) error {
	c, g, s := k.c, k.g, k.s
	n, me := g.n, c.Me
	radix := g.radix
	span := 1 // the ranks each member of this level stands for
	l := 1
	for ; span < n && me%(span*radix) == 0; l, span = l+1, span*radix {
		hi := min(me+span*radix, n)
		// The partial result of the member that starts at j.
		part := func(j int) ([]byte, error) {
			last := min(j+span, n) - 1
			if span == 1 {
				return k.wait(last, m)
			}
			if j != me {
				if err := c.shmWait(func(r int) bool { return atomic.LoadUint64(g.level(r, l-1)) >= s }, j, j+1); err != nil {
					return nil, err
				}
			}
			b, size, ok := g.data(last, s)
			if !ok {
				return nil, k.skipped(last)
			}
			if size != m {
				return nil, sizeMismatch(last, size, m)
			}
			return b, nil
		}
		acc, err := part(me)
		if err != nil {
			return err
		}
		for j := me + span; j < hi; j += span {
			b, err := part(j)
			if err != nil {
				return err
			}
			a.Op.Apply(acc[:m], b[:m])
			acc = b
		}
		atomic.StoreUint64(g.level(me, l), s)
	}
	if me == 0 {
		atomic.StoreUint64(g.release(), s)
	}
	return nil
}

// released waits until rank 0 has released call s: every rank has entered
// it, and the tree's result is in rank n-1's buffer.
func (k *shmCall) released() error {
	g, s := k.g, k.s
	if err := k.c.shmWait(func(int) bool { return atomic.LoadUint64(g.release()) >= s }, 0, 1); err != nil {
		return err
	}
	g.seen = max(g.seen, s)
	return nil
}

// reduceTree folds own through the tree and returns the result at a rank
// that wants it (nil elsewhere).
func (k *shmCall) reduceTree(a *Args, own []byte, want bool) ([]byte, error) {
	m := len(own)
	copy(k.mine(m), own)
	k.publish(m)
	if err := k.fanIn(a, m); err != nil {
		return nil, err
	}
	if !want {
		return nil, nil
	}
	if err := k.released(); err != nil {
		return nil, err
	}
	return k.result(m)
}
