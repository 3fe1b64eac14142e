package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun/gorun/mpi"
)

// Reduce, Gather, Scatter and Alltoall on an intercommunicator (issue 16),
// between the even and the odd world ranks (groups of different sizes at
// odd np): the root is in one group and the other group contributes or
// receives; every result against a sequential computation from world
// ranks.

func init() { rankCases["intercoll"] = caseIntercoll }

// interRootArg is the root argument of a rooted intercommunicator
// collective whose root is local rank lr of group rootColor.
func interRootArg(color, localRank, rootColor, lr int) int {
	switch {
	case color != rootColor:
		return lr
	case localRank == lr:
		return mpi.Root
	}
	return mpi.ProcNull
}

func caseIntercoll(w *mpi.Comm) error {
	rank, n := w.Rank(), w.Size()
	color := rank % 2
	local, inter, err := evenOdd(w)
	if err != nil {
		return err
	}
	me, rsize := local.Rank(), inter.RemoteSize()
	// The world rank of remote rank j, and of local rank j.
	remote := func(j int) int { return 2*j + 1 - color }
	size := func(c int) int { return (n + 1 - c) / 2 } // group c's size
	const k = 1000                                     // elements per process

	for _, rootColor := range []int{0, 1} {
		lr := size(rootColor) - 1 // the root: the group's last rank
		root := interRootArg(color, me, rootColor, lr)
		isRoot := root == mpi.Root

		// Reduce: the root gets the sum over the other group of each
		// process's vector (world rank r contributes r*k + i).
		send := make([]int64, k)
		for i := range send {
			send[i] = int64(rank*k + i)
		}
		var recv []int64
		if isRoot {
			recv = make([]int64, k)
		}
		if err := mpi.Reduce(inter, send, recv, mpi.Sum, root); err != nil {
			return fmt.Errorf("Reduce, root in group %d: %w", rootColor, err)
		}
		if isRoot {
			for i, v := range recv {
				var want int64
				for j := range rsize {
					want += int64(remote(j)*k + i)
				}
				if v != want {
					return fmt.Errorf("Reduce, root in group %d: element %d = %d, want %d", rootColor, i, v, want)
				}
			}
		}

		// Gather: the root gets every remote process's block in its
		// rank order.
		if isRoot {
			recv = make([]int64, rsize*k)
		}
		if err := mpi.Gather(inter, send, recv, root); err != nil {
			return fmt.Errorf("Gather, root in group %d: %w", rootColor, err)
		}
		if isRoot {
			for j := range rsize {
				for i := range k {
					if want := int64(remote(j)*k + i); recv[j*k+i] != want {
						return fmt.Errorf("Gather, root in group %d: block %d element %d = %d, want %d", rootColor, j, i, recv[j*k+i], want)
					}
				}
			}
		}

		// Scatter: remote process j gets block j of the root's buffer.
		var all []float64
		if isRoot {
			all = make([]float64, rsize*k)
			for i := range all {
				all[i] = float64(rank) + float64(i)/4
			}
		}
		got := make([]float64, k)
		if err := mpi.Scatter(inter, all, got, root); err != nil {
			return fmt.Errorf("Scatter, root in group %d: %w", rootColor, err)
		}
		if color != rootColor {
			rootWorld := 2*lr + rootColor
			for i, v := range got {
				if want := float64(rootWorld) + float64(me*k+i)/4; v != want {
					return fmt.Errorf("Scatter, root in group %d: element %d = %v, want %v", rootColor, i, v, want)
				}
			}
		}
	}

	// Alltoall: block j goes to remote j; blocks of 3 elements.
	const b = 3
	s := make([]int32, rsize*b)
	for j := range rsize {
		for i := range b {
			s[j*b+i] = int32(rank*10000 + remote(j)*10 + i)
		}
	}
	r := make([]int32, rsize*b)
	if err := mpi.Alltoall(inter, s, r); err != nil {
		return fmt.Errorf("Alltoall: %w", err)
	}
	for j := range rsize {
		for i := range b {
			if want := int32(remote(j)*10000 + rank*10 + i); r[j*b+i] != want {
				return fmt.Errorf("Alltoall: block %d element %d = %d, want %d", j, i, r[j*b+i], want)
			}
		}
	}

	// A bad root fails every process (the others through the abort).
	if err := mpi.Reduce(inter, []int64{1}, []int64{0}, mpi.Sum, rsize+3); err == nil {
		return errors.New("Reduce with a root outside the remote group succeeded")
	}
	if err := mpi.Barrier(inter); err != nil {
		return err
	}
	return mpi.Barrier(w)
}

func TestIntercoll(t *testing.T) {
	for _, np := range []int{2, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "intercoll"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "intercoll", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}

// The v forms, ReduceScatter and ReduceScatterBlock on an
// intercommunicator, and every intercommunicator collective in its
// nonblocking form (issue 16): the even/odd intercommunicator, every
// result against a sequential computation from world ranks. The steps run
// once blocking, one after the other, and once nonblocking, all started
// before any is waited for.

func init() { rankCases["intercoll-v"] = caseIntercollV }

// interVLayout lays blocks of the given counts out in reverse order, one
// element apart: their displacements and the buffer's length.
func interVLayout(counts []int) ([]int, int) {
	displs := make([]int, len(counts))
	off := 0
	for j := len(counts) - 1; j >= 0; j-- {
		displs[j] = off
		off += counts[j] + 1
	}
	return displs, off
}

// interVWant is a buffer of size elements with element i of block j (counts,
// displs) val(j, i), and -1 between the blocks.
func interVWant(counts, displs []int, size int, val func(j, i int) int64) []int64 {
	b := make([]int64, size)
	for i := range b {
		b[i] = -1
	}
	for j, k := range counts {
		for i := range k {
			b[displs[j]+i] = val(j, i)
		}
	}
	return b
}

// interStep is one collective of caseIntercollV: run makes the call,
// blocking or not (then it returns the request), and returns the check of
// its result, to run once the call is complete.
type interStep struct {
	name string
	run  func(nb bool) (*mpi.Request, func() error, error)
}

// blockingOrStart runs the blocking form b or starts the nonblocking form n.
func blockingOrStart(nb bool, b func() error, n func() (*mpi.Request, error)) (*mpi.Request, error) {
	if nb {
		return n()
	}
	return nil, b()
}

func sameAs[T comparable](what string, got, want []T) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: got %v, want %v", what, got, want)
	}
	return nil
}

func caseIntercollV(w *mpi.Comm) error {
	rank, n := w.Rank(), w.Size()
	color := rank % 2
	local, inter, err := evenOdd(w)
	if err != nil {
		return err
	}
	me, lsize, rsize := local.Rank(), local.Size(), inter.RemoteSize()
	remote := func(j int) int { return 2*j + 1 - color }
	size := func(c int) int { return (n + 1 - c) / 2 }
	cnt := func(r int) int { return (r * 7) % 4 } // world rank r's block: 0 to 3 elements
	rootArg := func(rootColor, lr int) int { return interRootArg(color, me, rootColor, lr) }
	counts := make([]int, rsize) // the remote processes' blocks
	for j := range counts {
		counts[j] = cnt(remote(j))
	}
	displs, vsize := interVLayout(counts)
	var steps []interStep

	for _, rc := range []int{0, 1} {
		lr := size(rc) - 1
		rootWorld := 2*lr + rc
		steps = append(steps, interStep{fmt.Sprint("Gatherv to group ", rc), func(nb bool) (*mpi.Request, func() error, error) {
			root := rootArg(rc, lr)
			send := make([]int64, cnt(rank))
			for i := range send {
				send[i] = int64(rank*100 + i)
			}
			var recv []int64
			if root == mpi.Root {
				recv = interVWant(counts, displs, vsize, func(int, int) int64 { return -1 })
			}
			q, err := blockingOrStart(nb, func() error { return mpi.Gatherv(inter, send, recv, counts, displs, root) },
				func() (*mpi.Request, error) { return mpi.Igatherv(inter, send, recv, counts, displs, root) })
			return q, func() error {
				if root != mpi.Root {
					return nil
				}
				return sameAs("Gatherv", recv, interVWant(counts, displs, vsize, func(j, i int) int64 { return int64(remote(j)*100 + i) }))
			}, err
		}})
		steps = append(steps, interStep{fmt.Sprint("Scatterv from group ", rc), func(nb bool) (*mpi.Request, func() error, error) {
			root := rootArg(rc, lr)
			var send []int64
			if root == mpi.Root {
				send = interVWant(counts, displs, vsize, func(j, i int) int64 { return int64(rank*1000 + j*10 + i) })
			}
			recv := make([]int64, cnt(rank))
			if color == rc {
				recv = nil
			}
			q, err := blockingOrStart(nb, func() error { return mpi.Scatterv(inter, send, counts, displs, recv, root) },
				func() (*mpi.Request, error) { return mpi.Iscatterv(inter, send, counts, displs, recv, root) })
			return q, func() error {
				want := make([]int64, len(recv))
				for i := range want {
					want[i] = int64(rootWorld*1000 + me*10 + i)
				}
				return sameAs("Scatterv", recv, want)
			}, err
		}})
	}

	steps = append(steps, interStep{"Allgatherv", func(nb bool) (*mpi.Request, func() error, error) {
		send := make([]int64, cnt(rank))
		for i := range send {
			send[i] = int64(rank*100 + i)
		}
		recv := interVWant(counts, displs, vsize, func(int, int) int64 { return -1 })
		q, err := blockingOrStart(nb, func() error { return mpi.Allgatherv(inter, send, recv, counts, displs) },
			func() (*mpi.Request, error) { return mpi.Iallgatherv(inter, send, recv, counts, displs) })
		return q, func() error {
			return sameAs("Allgatherv", recv, interVWant(counts, displs, vsize, func(j, i int) int64 { return int64(remote(j)*100 + i) }))
		}, err
	}})

	steps = append(steps, interStep{"Alltoallv", func(nb bool) (*mpi.Request, func() error, error) {
		blk := func(a, b int) int { return (a + 2*b) % 3 } // the block world rank a sends world rank b
		scounts, sdispls, rcounts := make([]int, rsize), make([]int, rsize), make([]int, rsize)
		var send []int64
		for j := range rsize {
			scounts[j], sdispls[j], rcounts[j] = blk(rank, remote(j)), len(send), blk(remote(j), rank)
			for i := range scounts[j] {
				send = append(send, int64(rank*1000+remote(j)*10+i))
			}
		}
		rdispls, rsz := interVLayout(rcounts)
		recv := interVWant(rcounts, rdispls, rsz, func(int, int) int64 { return -1 })
		q, err := blockingOrStart(nb, func() error { return mpi.Alltoallv(inter, send, scounts, sdispls, recv, rcounts, rdispls) },
			func() (*mpi.Request, error) {
				return mpi.Ialltoallv(inter, send, scounts, sdispls, recv, rcounts, rdispls)
			})
		return q, func() error {
			return sameAs("Alltoallv", recv, interVWant(rcounts, rdispls, rsz, func(j, i int) int64 { return int64(remote(j)*1000 + rank*10 + i) }))
		}, err
	}})

	steps = append(steps, interStep{"ReduceScatter", func(nb bool) (*mpi.Request, func() error, error) {
		const total = 13 // both groups' vectors; shared unevenly over each group
		rcounts := make([]int, lsize)
		off := 0
		for i := range rcounts {
			rcounts[i] = total / lsize
			if i < total%lsize {
				rcounts[i]++
			}
			if i < me {
				off += rcounts[i]
			}
		}
		send := make([]int64, total)
		for e := range send {
			send[e] = int64(rank*1000 + e)
		}
		recv := make([]int64, rcounts[me])
		q, err := blockingOrStart(nb, func() error { return mpi.ReduceScatter(inter, send, recv, rcounts, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.IreduceScatter(inter, send, recv, rcounts, mpi.Sum) })
		return q, func() error {
			want := make([]int64, len(recv))
			for i := range want {
				for j := range rsize {
					want[i] += int64(remote(j)*1000 + off + i)
				}
			}
			return sameAs("ReduceScatter", recv, want)
		}, err
	}})

	steps = append(steps, interStep{"ReduceScatterBlock", func(nb bool) (*mpi.Request, func() error, error) {
		total := 2 * lsize * rsize // the same in both groups
		blk := total / lsize
		send := make([]float64, total)
		for e := range send {
			send[e] = float64(rank) + float64(e)/8
		}
		recv := make([]float64, blk)
		q, err := blockingOrStart(nb, func() error { return mpi.ReduceScatterBlock(inter, send, recv, mpi.Max) },
			func() (*mpi.Request, error) { return mpi.IreduceScatterBlock(inter, send, recv, mpi.Max) })
		return q, func() error {
			want := make([]float64, blk)
			for i := range want {
				want[i] = float64(remote(rsize-1)) + float64(me*blk+i)/8
			}
			return sameAs("ReduceScatterBlock", recv, want)
		}, err
	}})

	// The collectives of intercoll's other cases, here for their
	// nonblocking forms.
	steps = append(steps, interStep{"Barrier", func(nb bool) (*mpi.Request, func() error, error) {
		q, err := blockingOrStart(nb, func() error { return mpi.Barrier(inter) }, func() (*mpi.Request, error) { return mpi.Ibarrier(inter) })
		return q, func() error { return nil }, err
	}})
	steps = append(steps, interStep{"Bcast from group 1", func(nb bool) (*mpi.Request, func() error, error) {
		lr := size(1) - 1
		root := rootArg(1, lr)
		buf := []int32{-1, -1, -1}
		if root == mpi.Root {
			buf = []int32{7, 8, int32(rank)}
		}
		q, err := blockingOrStart(nb, func() error { return mpi.Bcast(inter, buf, root) }, func() (*mpi.Request, error) { return mpi.Ibcast(inter, buf, root) })
		return q, func() error {
			want := []int32{7, 8, int32(2*lr + 1)}
			if root == mpi.ProcNull {
				want = []int32{-1, -1, -1}
			}
			return sameAs("Bcast", buf, want)
		}, err
	}})
	steps = append(steps, interStep{"Reduce to group 0", func(nb bool) (*mpi.Request, func() error, error) {
		root := rootArg(0, 0)
		send, recv := []int64{int64(rank), int64(-rank)}, make([]int64, 2)
		q, err := blockingOrStart(nb, func() error { return mpi.Reduce(inter, send, recv, mpi.Max, root) },
			func() (*mpi.Request, error) { return mpi.Ireduce(inter, send, recv, mpi.Max, root) })
		return q, func() error {
			if root != mpi.Root {
				return nil
			}
			return sameAs("Reduce", recv, []int64{int64(remote(rsize - 1)), -1})
		}, err
	}})
	steps = append(steps, interStep{"Allreduce", func(nb bool) (*mpi.Request, func() error, error) {
		send, recv := []int64{int64(rank), 1}, make([]int64, 2)
		q, err := blockingOrStart(nb, func() error { return mpi.Allreduce(inter, send, recv, mpi.Sum) },
			func() (*mpi.Request, error) { return mpi.Iallreduce(inter, send, recv, mpi.Sum) })
		return q, func() error {
			var s int64
			for j := range rsize {
				s += int64(remote(j))
			}
			return sameAs("Allreduce", recv, []int64{s, int64(rsize)})
		}, err
	}})
	steps = append(steps, interStep{"Gather to group 1, Scatter from group 0", func(nb bool) (*mpi.Request, func() error, error) {
		groot := rootArg(1, 0)
		var grecv []int64
		if groot == mpi.Root {
			grecv = make([]int64, 2*rsize)
		}
		q1, err := blockingOrStart(nb, func() error { return mpi.Gather(inter, []int64{int64(rank), 5}, grecv, groot) },
			func() (*mpi.Request, error) { return mpi.Igather(inter, []int64{int64(rank), 5}, grecv, groot) })
		if err != nil {
			return nil, nil, err
		}
		sroot := rootArg(0, size(0)-1)
		var ssend []int64
		if sroot == mpi.Root {
			for j := range rsize {
				ssend = append(ssend, int64(j), int64(rank))
			}
		}
		srecv := []int64{-1, -1}
		q2, err := blockingOrStart(nb, func() error { return mpi.Scatter(inter, ssend, srecv, sroot) },
			func() (*mpi.Request, error) { return mpi.Iscatter(inter, ssend, srecv, sroot) })
		if err != nil {
			return nil, nil, err
		}
		if nb {
			if _, err := mpi.Waitall([]*mpi.Request{q1, q2}); err != nil {
				return nil, nil, err
			}
		}
		return nil, func() error {
			if groot == mpi.Root {
				var want []int64
				for j := range rsize {
					want = append(want, int64(remote(j)), 5)
				}
				if err := sameAs("Gather", grecv, want); err != nil {
					return err
				}
			}
			if color == 1 {
				return sameAs("Scatter", srecv, []int64{int64(me), int64(2 * (size(0) - 1))})
			}
			return nil
		}, nil
	}})
	steps = append(steps, interStep{"Allgather and Alltoall", func(nb bool) (*mpi.Request, func() error, error) {
		ag := make([]int64, rsize)
		q1, err := blockingOrStart(nb, func() error { return mpi.Allgather(inter, []int64{int64(rank)}, ag) },
			func() (*mpi.Request, error) { return mpi.Iallgather(inter, []int64{int64(rank)}, ag) })
		if err != nil {
			return nil, nil, err
		}
		as, ar := make([]int64, rsize), make([]int64, rsize)
		for j := range as {
			as[j] = int64(rank*100 + remote(j))
		}
		q2, err := blockingOrStart(nb, func() error { return mpi.Alltoall(inter, as, ar) },
			func() (*mpi.Request, error) { return mpi.Ialltoall(inter, as, ar) })
		if err != nil {
			return nil, nil, err
		}
		if nb {
			if _, err := mpi.Waitall([]*mpi.Request{q1, q2}); err != nil {
				return nil, nil, err
			}
		}
		return nil, func() error {
			wg, wa := make([]int64, rsize), make([]int64, rsize)
			for j := range rsize {
				wg[j], wa[j] = int64(remote(j)), int64(remote(j)*100+rank)
			}
			return errors.Join(sameAs("Allgather", ag, wg), sameAs("Alltoall", ar, wa))
		}, nil
	}})

	for _, nb := range []bool{false, true} {
		var reqs []*mpi.Request
		var checks []func() error
		for _, st := range steps {
			q, chk, err := st.run(nb)
			if err != nil {
				return fmt.Errorf("%s (nonblocking %v): %w", st.name, nb, err)
			}
			if q != nil {
				reqs = append(reqs, q)
			}
			checks = append(checks, func() error {
				if err := chk(); err != nil {
					return fmt.Errorf("%s (nonblocking %v): %w", st.name, nb, err)
				}
				return nil
			})
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return fmt.Errorf("Waitall of the nonblocking steps: %w", err)
		}
		for _, chk := range checks {
			if err := chk(); err != nil {
				return err
			}
		}
	}
	return intercollVErrors(inter, color, rsize)
}

// intercollVErrors: bad arguments fail the call where they are passed,
// with their class, and the other processes' calls through the abort,
// blocking or not; the intercommunicator works afterwards.
func intercollVErrors(inter *mpi.Comm, color, rsize int) error {
	wait := func(q *mpi.Request, err error) error {
		if err != nil {
			return err
		}
		_, err = q.Wait()
		return err
	}
	for _, nb := range []bool{false, true} {
		// Gatherv: the root (group 0's rank 0) passes a count too many:
		// ErrCount there.
		root := interRootArg(color, inter.Rank(), 0, 0)
		var recv []int64
		bad := make([]int, rsize+1)
		if root == mpi.Root {
			recv = make([]int64, rsize+1)
		}
		err := blockingOrNot(nb, func() error { return mpi.Gatherv(inter, []int64{1}, recv, bad, bad, root) },
			func() error { return wait(mpi.Igatherv(inter, []int64{1}, recv, bad, bad, root)) })
		// The senders' part may be over (sent) before the abort comes.
		if root == mpi.Root && !errors.Is(err, mpi.ErrCount) {
			return fmt.Errorf("Gatherv with %d counts (nonblocking %v): %v, want ErrCount", rsize+1, nb, err)
		}
		// ReduceScatter: the groups' vectors differ in length.
		total := 6 + color
		counts := make([]int, inter.Size())
		counts[0] = total
		err = blockingOrNot(nb, func() error {
			return mpi.ReduceScatter(inter, make([]int32, total), make([]int32, total), counts, mpi.Sum)
		},
			func() error {
				return wait(mpi.IreduceScatter(inter, make([]int32, total), make([]int32, total), counts, mpi.Sum))
			})
		if !errors.Is(err, mpi.ErrCount) {
			return fmt.Errorf("ReduceScatter of 6 and 7 elements (nonblocking %v): %v, want ErrCount", nb, err)
		}
		// Alltoallv in place: no such form on an intercommunicator.
		buf, ones, zeros := make([]int8, rsize), make([]int, rsize), make([]int, rsize)
		for j := range ones {
			ones[j], zeros[j] = 1, j
		}
		err = blockingOrNot(nb, func() error { return mpi.Alltoallv(inter, buf, ones, zeros, buf, ones, zeros) },
			func() error { return wait(mpi.Ialltoallv(inter, buf, ones, zeros, buf, ones, zeros)) })
		if !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("Alltoallv in place (nonblocking %v): %v, want ErrBuffer", nb, err)
		}
		s, r := []int{1}, []int{0}
		if err := mpi.Allreduce(inter, s, r, mpi.Sum); err != nil || r[0] != rsize {
			return fmt.Errorf("Allreduce after the failed calls: %v, %v", r, err)
		}
	}
	return nil
}

// blockingOrNot runs b, or n when nb.
func blockingOrNot(nb bool, b, n func() error) error {
	if nb {
		return n()
	}
	return b()
}

func TestIntercollV(t *testing.T) {
	for _, np := range []int{2, 5} {
		t.Run(fmt.Sprint("np=", np), func(t *testing.T) { job{np: np, cas: "intercoll-v"}.ok(t) })
	}
	t.Run("tcp/np=3", func(t *testing.T) { job{np: 3, cas: "intercoll-v", env: []string{"GORUN_BTL=tcp,self"}}.ok(t) })
}
