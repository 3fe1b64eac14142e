package collsoak

import (
	"fmt"
	"math/rand/v2"

	"github.com/gorun/gorun/mpi"
)

// elem is the element types a soak passes: int64 with every operation,
// float64 of small integers with Sum (exact in any order).
type elem interface{ int64 | float64 }

func runInt(c *mpi.Comm, k *call) error   { return runOne[int64](c, k) }
func runFloat(c *mpi.Comm, k *call) error { return runOne[float64](c, k) }

func runOne[T elem](c *mpi.Comm, k *call) error {
	start, check, err := prepare[T](c, k, false)
	if err != nil {
		return err
	}
	if _, err := start(); err != nil {
		return err
	}
	return check()
}

// burst starts nb nonblocking calls drawn after k, waits for them
// together and checks each.
func burst(c *mpi.Comm, k *call, rng *rand.Rand, nb int, count map[string]int) error {
	reqs := make([]*mpi.Request, 0, nb)
	checks := make([]func() error, 0, nb)
	subs := make([]call, nb)
	for j := range subs {
		s := draw(rng, 0, 16<<10, 0) // up to 16 KiB: nb of them at once
		s.comm = k.comm
		s.kind = nbKinds[rng.IntN(len(nbKinds))]
		subs[j] = s
	}
	for j := range subs {
		s := &subs[j]
		s.step = k.step*8 + j + 1<<30 // inputs of their own
		var start func() (*mpi.Request, error)
		var check func() error
		var err error
		if s.float {
			start, check, err = prepare[float64](c, s, true)
		} else {
			start, check, err = prepare[int64](c, s, true)
		}
		if err != nil {
			return fmt.Errorf("%v (in a burst): %w", s, err)
		}
		r, err := start()
		if err != nil {
			return fmt.Errorf("%v (in a burst): start: %w", s, err)
		}
		reqs, checks = append(reqs, r), append(checks, check)
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return fmt.Errorf("call %d: a burst of %d nonblocking calls: %w", k.step, nb, err)
	}
	for j, check := range checks {
		if err := check(); err != nil {
			return fmt.Errorf("%v (in a burst): %w", &subs[j], err)
		}
		count[subs[j].kind]++
	}
	return nil
}

// inputs returns rank r's n elements of call k from element lo on.
func inputs[T elem](k *call, r, lo, n int) []T {
	b := make([]T, n)
	for i := range b {
		v := value(k.step, r, lo+i)
		if k.float {
			b[i] = T(v % 1000)
		} else {
			b[i] = T(v)
		}
	}
	return b
}

// foldOf is k's operation on T.
func foldOf[T elem](k *call) (mpi.Op, func(a, b T) T) {
	if k.float {
		return mpi.Sum, func(a, b T) T { return a + b }
	}
	f := ops[k.op].f
	return ops[k.op].op, func(a, b T) T { return T(f(int64(a), int64(b))) }
}

// folded is the fold over ranks lo..hi-1 of their n elements from
// element at on.
func folded[T elem](k *call, lo, hi, at, n int) []T {
	_, f := foldOf[T](k)
	acc := inputs[T](k, lo, at, n)
	for r := lo + 1; r < hi; r++ {
		b := inputs[T](k, r, at, n)
		for i := range acc {
			acc[i] = f(acc[i], b[i])
		}
	}
	return acc
}

// vcounts are the per-rank counts of the v forms: up to n elements, some
// none, different at every call.
func vcounts(k *call, size, n int) (counts, displs []int, total int) {
	counts, displs = make([]int, size), make([]int, size)
	for r := range size {
		counts[r] = int(uint64(value(k.step, r, -1)) % uint64(n+1))
		if r%3 == 1 {
			counts[r] = 0
		}
		displs[r] = total
		total += counts[r] + r%2 // a gap after odd ranks
	}
	return counts, displs, total
}

func same[T elem](what string, got, want []T) error {
	if len(got) < len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, len(want), got[i], want[i])
		}
	}
	return nil
}

// prepare makes call k's buffers at this rank of c and returns what
// starts it (blocking: runs it, with a nil request) and what checks its
// result.
func prepare[T elem](c *mpi.Comm, k *call, nonblocking bool) (start func() (*mpi.Request, error), check func() error, err error) {
	size, me := c.Size(), c.Rank()
	root := k.root % size
	op, _ := foldOf[T](k)
	n := k.bytes / 8
	blk := n / size // a block of the per-rank-block calls: all blocks within k.bytes
	run := func(b func() error, nb func() (*mpi.Request, error)) func() (*mpi.Request, error) {
		if nonblocking {
			return nb
		}
		return func() (*mpi.Request, error) { return nil, b() }
	}
	switch k.kind {
	case "barrier", "ibarrier":
		return run(func() error { return mpi.Barrier(c) }, func() (*mpi.Request, error) { return mpi.Ibarrier(c) }),
			func() error { return nil }, nil
	case "bcast", "ibcast":
		buf := make([]T, n)
		if me == root {
			copy(buf, inputs[T](k, root, 0, n))
		}
		return run(func() error { return mpi.Bcast(c, buf, root) }, func() (*mpi.Request, error) { return mpi.Ibcast(c, buf, root) }),
			func() error { return same("bcast", buf, inputs[T](k, root, 0, n)) }, nil
	case "reduce", "ireduce":
		send, recv := inputs[T](k, me, 0, n), []T(nil)
		if me == root {
			recv = make([]T, n)
			if k.inPlace && !nonblocking {
				recv = send
			}
		}
		return run(func() error { return mpi.Reduce(c, send, recv, op, root) }, func() (*mpi.Request, error) { return mpi.Ireduce(c, send, recv, op, root) }),
			func() error {
				if me != root {
					return nil
				}
				return same("reduce at the root", recv, folded[T](k, 0, size, 0, n))
			}, nil
	case "allreduce", "iallreduce":
		send := inputs[T](k, me, 0, n)
		recv := make([]T, n)
		if k.inPlace {
			recv = send
		}
		return run(func() error { return mpi.Allreduce(c, send, recv, op) }, func() (*mpi.Request, error) { return mpi.Iallreduce(c, send, recv, op) }),
			func() error { return same("allreduce", recv, folded[T](k, 0, size, 0, n)) }, nil
	case "scan", "exscan":
		send := inputs[T](k, me, 0, n)
		recv := make([]T, n)
		if k.inPlace {
			recv = send
		}
		if k.kind == "scan" {
			return run(func() error { return mpi.Scan(c, send, recv, op) }, nil),
				func() error { return same("scan", recv, folded[T](k, 0, me+1, 0, n)) }, nil
		}
		return run(func() error { return mpi.Exscan(c, send, recv, op) }, nil),
			func() error {
				if me == 0 {
					return nil // not written
				}
				return same("exscan", recv, folded[T](k, 0, me, 0, n))
			}, nil
	case "allgather", "iallgather", "gather":
		recv := make([]T, blk*size)
		send := inputs[T](k, me, 0, blk)
		gather := k.kind == "gather"
		if k.inPlace && !nonblocking && (!gather || me == root) {
			copy(recv[me*blk:], send)
			send = recv[me*blk : (me+1)*blk]
		}
		if gather && me != root {
			recv = nil
		}
		want := func() []T {
			w := make([]T, 0, blk*size)
			for r := range size {
				w = append(w, inputs[T](k, r, 0, blk)...)
			}
			return w
		}
		if gather {
			return run(func() error { return mpi.Gather(c, send, recv, root) }, nil),
				func() error {
					if me != root {
						return nil
					}
					return same("gather at the root", recv, want())
				}, nil
		}
		return run(func() error { return mpi.Allgather(c, send, recv) }, func() (*mpi.Request, error) { return mpi.Iallgather(c, send, recv) }),
			func() error { return same("allgather", recv, want()) }, nil
	case "scatter":
		var send []T
		recv := make([]T, blk)
		if me == root {
			send = inputs[T](k, root, 0, blk*size)
			if k.inPlace {
				recv = send[me*blk : (me+1)*blk]
			}
		}
		return run(func() error { return mpi.Scatter(c, send, recv, root) }, nil),
			func() error { return same("scatter", recv, inputs[T](k, root, me*blk, blk)) }, nil
	case "alltoall", "ialltoall":
		send := inputs[T](k, me, 0, blk*size)
		recv := make([]T, blk*size)
		if k.inPlace && !nonblocking {
			copy(recv, send)
			send = recv
		}
		return run(func() error { return mpi.Alltoall(c, send, recv) }, func() (*mpi.Request, error) { return mpi.Ialltoall(c, send, recv) }),
			func() error {
				for r := range size {
					if err := same(fmt.Sprintf("alltoall, block from rank %d", r), recv[r*blk:], inputs[T](k, r, me*blk, blk)); err != nil {
						return err
					}
				}
				return nil
			}, nil
	case "reduce_scatter_block", "ireduce_scatter_block":
		send := inputs[T](k, me, 0, blk*size)
		recv := make([]T, blk)
		if k.inPlace && !nonblocking {
			recv = send
		}
		return run(func() error { return mpi.ReduceScatterBlock(c, send, recv, op) }, func() (*mpi.Request, error) { return mpi.IreduceScatterBlock(c, send, recv, op) }),
			func() error { return same("reduce_scatter_block", recv, folded[T](k, 0, size, me*blk, blk)) }, nil
	case "reduce_scatter":
		counts, _, _ := vcounts(k, size, blk)
		total, at := 0, 0
		for r, n := range counts {
			if r == me {
				at = total
			}
			total += n
		}
		send := inputs[T](k, me, 0, total)
		recv := make([]T, counts[me])
		if k.inPlace {
			recv = send
		}
		return run(func() error { return mpi.ReduceScatter(c, send, recv, counts, op) }, nil),
			func() error { return same("reduce_scatter", recv, folded[T](k, 0, size, at, counts[me])) }, nil
	case "allgatherv", "gatherv":
		counts, displs, total := vcounts(k, size, blk)
		recv := make([]T, total)
		send := inputs[T](k, me, 0, counts[me])
		gather := k.kind == "gatherv"
		if k.inPlace && (!gather || me == root) {
			copy(recv[displs[me]:], send)
			send = recv[displs[me] : displs[me]+counts[me]]
		}
		check := func() error {
			for r := range size {
				if err := same(fmt.Sprintf("%s, block of rank %d", k.kind, r), recv[displs[r]:], inputs[T](k, r, 0, counts[r])); err != nil {
					return err
				}
			}
			return nil
		}
		if gather {
			if me != root {
				recv = nil
			}
			return run(func() error { return mpi.Gatherv(c, send, recv, counts, displs, root) }, nil),
				func() error {
					if me != root {
						return nil
					}
					return check()
				}, nil
		}
		return run(func() error { return mpi.Allgatherv(c, send, recv, counts, displs) }, nil), check, nil
	case "scatterv":
		counts, displs, total := vcounts(k, size, blk)
		var send []T
		recv := make([]T, counts[me])
		if me == root {
			send = inputs[T](k, root, 0, total)
			if k.inPlace {
				recv = send[displs[me] : displs[me]+counts[me]]
			}
		}
		return run(func() error { return mpi.Scatterv(c, send, counts, displs, recv, root) }, nil),
			func() error { return same("scatterv", recv, inputs[T](k, root, displs[me], counts[me])) }, nil
	case "alltoallv":
		// Rank s sends rank d count(s, d) elements, element i being s's
		// input element d<<16 + i.
		count := func(s, d int) int {
			if blk == 0 {
				return 0
			}
			return int(uint64(value(k.step, s, -1-d)) % uint64(blk+1))
		}
		sc, sd, rc, rd := make([]int, size), make([]int, size), make([]int, size), make([]int, size)
		var send, recv []T
		for d := range size {
			sc[d], sd[d] = count(me, d), len(send)
			send = append(send, inputs[T](k, me, d<<16, sc[d])...)
			rc[d], rd[d] = count(d, me), len(recv)+d%2
			recv = append(recv, make([]T, rc[d]+d%2)...)
		}
		return run(func() error { return mpi.Alltoallv(c, send, sc, sd, recv, rc, rd) }, nil),
			func() error {
				for s := range size {
					if err := same(fmt.Sprintf("alltoallv, from rank %d", s), recv[rd[s]:], inputs[T](k, s, me<<16, rc[s])); err != nil {
						return err
					}
				}
				return nil
			}, nil
	}
	return nil, nil, fmt.Errorf("collsoak: no call %q", k.kind)
}
