package tests

import (
	"fmt"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

// The GPU calls that work through device scratch: AlltoallGPU and
// AlltoallvGPU in place, ReduceScatterGPU (per-rank counts) out of place
// and in place, and their nonblocking forms. Inputs and references as in
// gpucoll_test.go (exact in every type, compared bit for bit).

// symCount is how many elements ranks i and j exchange in the in-place
// AlltoallvGPU (in place a rank's send layout is its receive layout, so
// the counts must be symmetric): uneven, none when (i+j)%3 == 1.
func symCount(base, i, j int) int {
	if base == 0 || (i+j)%3 == 1 {
		return 0
	}
	return base + i + j
}

// symLayout is rank i's layout for the in-place AlltoallvGPU: the block
// of every j in reverse rank order, one element apart.
func symLayout(n, base, i int) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for k := range n {
		j := n - 1 - k
		counts[j] = symCount(base, i, j)
		displs[j] = total
		total += counts[j] + 1
	}
	return counts, displs, total
}

// rsCounts is the ReduceScatterGPU test's counts: base+3r, rank 1 none.
func rsCounts(n, base int) (counts []int, total int) {
	counts = make([]int, n)
	for r := range n {
		if r != 1 {
			counts[r] = base + 3*r
		}
		total += counts[r]
	}
	return counts, total
}

func (g *gpuColl) inPlaceForms(dt gpu.DType, base int, nonblocking bool) error {
	w, me, n := g.w, g.w.Rank(), g.w.Size()
	tag := fmt.Sprintf("%v base %d", dt, base)
	run := func(what string, blocking func() error, start func() (*mpi.Request, error)) error {
		if !nonblocking {
			if err := blocking(); err != nil {
				return fmt.Errorf("%s %s: %w", what, tag, err)
			}
			return nil
		}
		q, err := start()
		if err == nil {
			_, err = q.Wait()
		}
		if err != nil {
			return fmt.Errorf("I%s %s: %w", what, tag, err)
		}
		return nil
	}

	// AlltoallGPU in place: base elements a block.
	g.call++
	r, err := g.upload(g.recv, dt, g.input(me, n*base, dt, mpi.Sum))
	if err != nil {
		return err
	}
	if err := run("AlltoallGPU in place", func() error { return mpi.AlltoallGPU(w, gpu.Buffer{}, r) },
		func() (*mpi.Request, error) { return mpi.IalltoallGPU(w, gpu.Buffer{}, r) }); err != nil {
		return err
	}
	var want []float64
	for j := range n {
		want = append(want, g.input(j, n*base, dt, mpi.Sum)[me*base:(me+1)*base]...)
	}
	if err := g.expect("AlltoallGPU in place "+tag, r, dt, want); err != nil {
		return err
	}

	// AlltoallvGPU in place (recvbuf itself as sendbuf), symmetric layout.
	g.call++
	rc, rd, rtotal := symLayout(n, base, me)
	in := g.input(me, rtotal, dt, mpi.Sum)
	if r, err = g.upload(g.recv, dt, in); err != nil {
		return err
	}
	if err := run("AlltoallvGPU in place", func() error { return mpi.AlltoallvGPU(w, r, nil, nil, r, rc, rd) },
		func() (*mpi.Request, error) { return mpi.IalltoallvGPU(w, gpu.Buffer{}, nil, nil, r, rc, rd) }); err != nil {
		return err
	}
	from := make([][]float64, n)
	for j := range n {
		jc, jd, jt := symLayout(n, base, j)
		from[j] = g.input(j, jt, dt, mpi.Sum)[jd[me] : jd[me]+jc[me]]
	}
	if err := g.expect("AlltoallvGPU in place "+tag, r, dt, place(in, from, rd)); err != nil {
		return err
	}

	// ReduceScatterGPU, out of place then in place.
	counts, total := rsCounts(n, base)
	off := 0
	for q := range me {
		off += counts[q]
	}
	for _, inPlace := range []bool{false, true} {
		g.call++
		op := []mpi.Op{mpi.Sum, mpi.Max}[g.call%2]
		what := "ReduceScatterGPU"
		if inPlace {
			what += " in place"
		}
		bg := g.filler(total, dt)
		r, err := g.upload(g.recv, dt, bg)
		if err != nil {
			return err
		}
		s := gpu.Buffer{}
		if inPlace {
			if r, err = g.upload(g.recv, dt, g.input(me, total, dt, op)); err != nil {
				return err
			}
		} else if s, err = g.upload(g.send, dt, g.input(me, total, dt, op)); err != nil {
			return err
		}
		if err := run(what, func() error { return mpi.ReduceScatterGPU(w, s, r, counts, op) },
			func() (*mpi.Request, error) { return mpi.IreduceScatterGPU(w, s, r, counts, op) }); err != nil {
			return err
		}
		want := g.reduced(total, dt, op)[off : off+counts[me]]
		if !inPlace {
			// The rest of recvbuf is left alone.
			want = append(want, bg[counts[me]:]...)
		}
		if err := g.expect(fmt.Sprintf("%s %v %s", what, op, tag), r, dt, want); err != nil {
			return err
		}
	}
	return nil
}
