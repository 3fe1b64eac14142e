package tests

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/mpi"
)

func init() { rankCases["gpu-v"] = caseGPUV }

// The calls added for issue 10's "wherever a slice is accepted":
// SendrecvGPU, the v forms, ScanGPU/ExscanGPU and the nonblocking forms.
// Inputs and references as in gpucoll_test.go (exact in every type,
// compared bit for bit on every rank); receive buffers are filled with
// other random values first, so that a write outside a block shows.

// vLayout is the uneven layout of the v forms' tests: rank r's block has
// base+5r elements, but rank 1's none (and every block none when base is
// 0); blocks lie in reverse rank order with two elements between them.
func vLayout(n, base int) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for r := range n {
		if base > 0 && r != 1 {
			counts[r] = base + 5*r
		}
	}
	for r := n - 1; r >= 0; r-- {
		displs[r] = total
		total += counts[r] + 2
	}
	return counts, displs, total
}

// a2aCount is how many elements rank i sends rank j in AlltoallvGPU's
// test: uneven, and none when (i+j)%3 == 1.
func a2aCount(base, i, j int) int {
	if base == 0 || (i+j)%3 == 1 {
		return 0
	}
	return base + i + 2*j
}

// a2aLayout is rank i's send layout (to every j, in rank order, one
// element apart) or, with recv, its receive layout (from every j, in
// reverse rank order, one element apart).
func a2aLayout(n, base, i int, recv bool) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for k := range n {
		j := k
		if recv {
			j = n - 1 - k
			counts[j] = a2aCount(base, j, i)
		} else {
			counts[j] = a2aCount(base, i, j)
		}
		displs[j] = total
		total += counts[j] + 1
	}
	return counts, displs, total
}

// filler returns count values that no call writes: the background of a
// receive buffer (drawn for rank n+r so that it differs from every input).
func (g *gpuColl) filler(count int, dt gpu.DType) []float64 {
	return g.input(g.w.Size()+g.w.Rank(), count, dt, mpi.Sum)
}

// place returns bg with each v[r] copied at displs[r].
func place(bg []float64, v [][]float64, displs []int) []float64 {
	out := append([]float64(nil), bg...)
	for r := range v {
		copy(out[displs[r]:], v[r])
	}
	return out
}

// scans checks ScanGPU and ExscanGPU, out of place and in place.
func (g *gpuColl) scans(dt gpu.DType, op mpi.Op, count int) error {
	w, me := g.w, g.w.Rank()
	tag := fmt.Sprintf("%v %v count %d", dt, op, count)
	prefix := func(upto int) []float64 { // inputs of ranks 0..upto folded
		acc := g.input(0, count, dt, op)
		for r := 1; r <= upto; r++ {
			x := g.input(r, count, dt, op)
			for i := range acc {
				acc[i] = gpuFold(op, acc[i], x[i])
			}
		}
		return acc
	}
	for _, ex := range []bool{false, true} {
		for _, inPlace := range []bool{false, true} {
			name := "ScanGPU"
			if ex {
				name = "ExscanGPU"
			}
			if inPlace {
				name += " in place"
			}
			g.call++
			mine := g.input(me, count, dt, op)
			bg := g.filler(count, dt)
			var s, r gpu.Buffer
			var err error
			if inPlace {
				bg = mine
				r, err = g.upload(g.recv, dt, mine)
			} else if s, err = g.upload(g.send, dt, mine); err == nil {
				r, err = g.upload(g.recv, dt, bg)
			}
			if err != nil {
				return err
			}
			switch {
			case ex && inPlace:
				err = mpi.ExscanGPU(w, gpu.Buffer{}, r, op)
			case ex:
				err = mpi.ExscanGPU(w, s, r, op)
			case inPlace:
				err = mpi.ScanGPU(w, r, r, op)
			default:
				err = mpi.ScanGPU(w, s, r, op)
			}
			if err != nil {
				return fmt.Errorf("%s %s: %w", name, tag, err)
			}
			want := prefix(me)
			if ex && me == 0 {
				want = bg // not written
			} else if ex {
				want = prefix(me - 1)
			}
			if err := g.expect(name+" "+tag, r, dt, want); err != nil {
				return err
			}
		}
	}
	return nil
}

// vforms checks AllgathervGPU, GathervGPU, ScattervGPU (each out of place
// and in place) and AlltoallvGPU on vLayout(base).
func (g *gpuColl) vforms(dt gpu.DType, base int) error {
	w, me, n := g.w, g.w.Rank(), g.w.Size()
	tag := fmt.Sprintf("%v base %d", dt, base)
	counts, displs, total := vLayout(n, base)
	blocks := func() [][]float64 {
		v := make([][]float64, n)
		for r := range n {
			v[r] = g.input(r, counts[r], dt, mpi.Sum)
		}
		return v
	}
	for _, inPlace := range []bool{false, true} {
		sfx := ""
		if inPlace {
			sfx = " in place"
		}
		// Allgatherv.
		g.call++
		bg := g.filler(total, dt)
		want := place(bg, blocks(), displs)
		start := bg
		if inPlace {
			start = append([]float64(nil), bg...)
			copy(start[displs[me]:], g.input(me, counts[me], dt, mpi.Sum))
		}
		r, err := g.upload(g.recv, dt, start)
		if err != nil {
			return err
		}
		s := r.Slice(displs[me], displs[me]+counts[me])
		if !inPlace {
			if s, err = g.upload(g.send, dt, g.input(me, counts[me], dt, mpi.Sum)); err != nil {
				return err
			}
		}
		if err := mpi.AllgathervGPU(w, s, r, counts, displs); err != nil {
			return fmt.Errorf("AllgathervGPU%s %s: %w", sfx, tag, err)
		}
		if err := g.expect("AllgathervGPU"+sfx+" "+tag, r, dt, want); err != nil {
			return err
		}

		// Gatherv to the last rank.
		g.call++
		root := n - 1
		bg = g.filler(total, dt)
		want = place(bg, blocks(), displs)
		start = bg
		if inPlace && me == root {
			start = append([]float64(nil), bg...)
			copy(start[displs[me]:], g.input(me, counts[me], dt, mpi.Sum))
		}
		if r, err = g.upload(g.recv, dt, start); err != nil {
			return err
		}
		if inPlace && me == root {
			s = gpu.Buffer{}
		} else if s, err = g.upload(g.send, dt, g.input(me, counts[me], dt, mpi.Sum)); err != nil {
			return err
		}
		if err := mpi.GathervGPU(w, s, r, counts, displs, root); err != nil {
			return fmt.Errorf("GathervGPU%s %s: %w", sfx, tag, err)
		}
		if me == root {
			if err := g.expect("GathervGPU"+sfx+" "+tag, r, dt, want); err != nil {
				return err
			}
		}

		// Scatterv from rank 0.
		g.call++
		root = 0
		whole := g.input(root, total, dt, mpi.Sum)
		if s, err = g.upload(g.send, dt, whole); err != nil {
			return err
		}
		mineBg := g.filler(counts[me], dt)
		if r, err = g.upload(g.recv, dt, mineBg); err != nil {
			return err
		}
		rv := view(g.recv, dt, counts[me])
		if inPlace && me == root {
			rv = s.Slice(displs[me], displs[me]+counts[me])
		}
		if err := mpi.ScattervGPU(w, s, counts, displs, rv, root); err != nil {
			return fmt.Errorf("ScattervGPU%s %s: %w", sfx, tag, err)
		}
		if err := g.expect("ScattervGPU"+sfx+" "+tag, rv, dt, whole[displs[me]:displs[me]+counts[me]]); err != nil {
			return err
		}
		if me == root {
			// The root's send buffer is left as it was.
			if err := g.expect("ScattervGPU"+sfx+" send buffer "+tag, s, dt, whole); err != nil {
				return err
			}
		}
	}

	// Alltoallv.
	g.call++
	sc, sd, stotal := a2aLayout(n, base, me, false)
	rc, rd, rtotal := a2aLayout(n, base, me, true)
	s, err := g.upload(g.send, dt, g.input(me, stotal, dt, mpi.Sum))
	if err != nil {
		return err
	}
	bg := g.filler(rtotal, dt)
	r, err := g.upload(g.recv, dt, bg)
	if err != nil {
		return err
	}
	if err := mpi.AlltoallvGPU(w, s, sc, sd, r, rc, rd); err != nil {
		return fmt.Errorf("AlltoallvGPU %s: %w", tag, err)
	}
	from := make([][]float64, n)
	for j := range n {
		jc, jd, jt := a2aLayout(n, base, j, false)
		from[j] = g.input(j, jt, dt, mpi.Sum)[jd[me] : jd[me]+jc[me]]
	}
	return g.expect("AlltoallvGPU "+tag, r, dt, place(bg, from, rd))
}

// sendrecv passes count elements around the ring with SendrecvGPU.
func (g *gpuColl) sendrecv(dt gpu.DType, count int) error {
	w, me, n := g.w, g.w.Rank(), g.w.Size()
	g.call++
	s, err := g.upload(g.send, dt, g.input(me, count, dt, mpi.Sum))
	if err != nil {
		return err
	}
	r, err := g.upload(g.recv, dt, g.filler(count, dt))
	if err != nil {
		return err
	}
	left := (me - 1 + n) % n
	st, err := mpi.SendrecvGPU(w, s, (me+1)%n, 7, r, left, 7)
	if err != nil {
		return fmt.Errorf("SendrecvGPU %v count %d: %w", dt, count, err)
	}
	if st.Source != left || st.Count() != count {
		return fmt.Errorf("SendrecvGPU %v count %d: status from %d count %d, want %d and %d", dt, count, st.Source, st.Count(), left, count)
	}
	return g.expect(fmt.Sprintf("SendrecvGPU %v count %d", dt, count), r, dt, g.input(left, count, dt, mpi.Sum))
}

// nonblocking starts every nonblocking GPU collective at once, each on its
// own part of one arena per side, waits for them all, and checks each.
func (g *gpuColl) nonblocking(dt gpu.DType, count int) error {
	w, me, n := g.w, g.w.Rank(), g.w.Size()
	g.call++
	base := g.call
	// Each call's inputs come from its own draw (call base+k).
	in := func(k, r, cnt int, op mpi.Op) []float64 {
		g.call = base + uint64(k)
		return g.input(r, cnt, dt, op)
	}
	type check struct {
		what string
		b    gpu.Buffer
		want []float64
	}
	var checks []check
	var reqs []*mpi.Request
	post := func(what string, start func() (*mpi.Request, error)) error {
		q, err := start()
		if err != nil {
			return fmt.Errorf("%s %v count %d: %w", what, dt, count, err)
		}
		reqs = append(reqs, q)
		return nil
	}
	load := func(b gpu.Buffer, v []float64) error { return b.CopyFromHost(encodeAll(dt, v)) }
	reduced := func(k, cnt int, op mpi.Op) []float64 {
		acc := in(k, 0, cnt, op)
		for r := 1; r < n; r++ {
			x := in(k, r, cnt, op)
			for i := range acc {
				acc[i] = gpuFold(op, acc[i], x[i])
			}
		}
		return acc
	}
	// pair carves sn elements of the send arena and rn of the receive one,
	// at the same offset, 256-byte aligned, apart from every other pair.
	type sr struct{ s, r gpu.Buffer }
	off := uintptr(0)
	pair := func(sn, rn int) sr {
		p := sr{gpu.Wrap(g.send.Device(), g.send.Ptr()+off, dt, sn), gpu.Wrap(g.recv.Device(), g.recv.Ptr()+off, dt, rn)}
		off += uintptr(max(sn, rn)*dt.Size()+255) &^ 255
		return p
	}
	// 0: Iallreduce Sum, 1: Iallreduce Max in place, 2: Ireduce Prod,
	// 3: IreduceScatterBlock Min, 4: Ibcast, 5: Iallgather, 6: Igather,
	// 7: Iscatter, 8: Ialltoall, 9: Iscan Sum, 10: Iexscan Max,
	// 11: Iallgatherv.
	b := pair(count, count)
	if err := load(b.s, in(0, me, count, mpi.Sum)); err != nil {
		return err
	}
	checks = append(checks, check{"IallreduceGPU", b.r, reduced(0, count, mpi.Sum)})
	if err := post("IallreduceGPU", func() (*mpi.Request, error) { return mpi.IallreduceGPU(w, b.s, b.r, mpi.Sum) }); err != nil {
		return err
	}
	b = pair(0, count)
	if err := load(b.r, in(1, me, count, mpi.Max)); err != nil {
		return err
	}
	checks = append(checks, check{"IallreduceGPU in place", b.r, reduced(1, count, mpi.Max)})
	if err := post("IallreduceGPU in place", func() (*mpi.Request, error) { return mpi.IallreduceGPU(w, gpu.Buffer{}, b.r, mpi.Max) }); err != nil {
		return err
	}
	b = pair(count, count)
	if err := load(b.s, in(2, me, count, mpi.Prod)); err != nil {
		return err
	}
	if me == n-1 {
		checks = append(checks, check{"IreduceGPU", b.r, reduced(2, count, mpi.Prod)})
	}
	if err := post("IreduceGPU", func() (*mpi.Request, error) { return mpi.IreduceGPU(w, b.s, b.r, mpi.Prod, n-1) }); err != nil {
		return err
	}
	b = pair(n*count, count)
	if err := load(b.s, in(3, me, n*count, mpi.Min)); err != nil {
		return err
	}
	checks = append(checks, check{"IreduceScatterBlockGPU", b.r, reduced(3, n*count, mpi.Min)[me*count : (me+1)*count]})
	if err := post("IreduceScatterBlockGPU", func() (*mpi.Request, error) { return mpi.IreduceScatterBlockGPU(w, b.s, b.r, mpi.Min) }); err != nil {
		return err
	}
	b = pair(0, count)
	if err := load(b.r, in(4, me, count, mpi.Sum)); err != nil {
		return err
	}
	checks = append(checks, check{"IbcastGPU", b.r, in(4, 0, count, mpi.Sum)})
	if err := post("IbcastGPU", func() (*mpi.Request, error) { return mpi.IbcastGPU(w, b.r, 0) }); err != nil {
		return err
	}
	all := func(k, per int) []float64 {
		var v []float64
		for r := range n {
			v = append(v, in(k, r, per, mpi.Sum)...)
		}
		return v
	}
	b = pair(count, n*count)
	if err := load(b.s, in(5, me, count, mpi.Sum)); err != nil {
		return err
	}
	checks = append(checks, check{"IallgatherGPU", b.r, all(5, count)})
	if err := post("IallgatherGPU", func() (*mpi.Request, error) { return mpi.IallgatherGPU(w, b.s, b.r) }); err != nil {
		return err
	}
	b = pair(count, n*count)
	if err := load(b.s, in(6, me, count, mpi.Sum)); err != nil {
		return err
	}
	if me == 0 {
		checks = append(checks, check{"IgatherGPU", b.r, all(6, count)})
	}
	if err := post("IgatherGPU", func() (*mpi.Request, error) { return mpi.IgatherGPU(w, b.s, b.r, 0) }); err != nil {
		return err
	}
	b = pair(n*count, count)
	if err := load(b.s, in(7, n-1, n*count, mpi.Sum)); err != nil {
		return err
	}
	checks = append(checks, check{"IscatterGPU", b.r, in(7, n-1, n*count, mpi.Sum)[me*count : (me+1)*count]})
	if err := post("IscatterGPU", func() (*mpi.Request, error) { return mpi.IscatterGPU(w, b.s, b.r, n-1) }); err != nil {
		return err
	}
	b = pair(n*count, n*count)
	if err := load(b.s, in(8, me, n*count, mpi.Sum)); err != nil {
		return err
	}
	var a2a []float64
	for p := range n {
		a2a = append(a2a, in(8, p, n*count, mpi.Sum)[me*count:(me+1)*count]...)
	}
	checks = append(checks, check{"IalltoallGPU", b.r, a2a})
	if err := post("IalltoallGPU", func() (*mpi.Request, error) { return mpi.IalltoallGPU(w, b.s, b.r) }); err != nil {
		return err
	}
	prefix := func(k, upto int, op mpi.Op) []float64 {
		acc := in(k, 0, count, op)
		for r := 1; r <= upto; r++ {
			x := in(k, r, count, op)
			for i := range acc {
				acc[i] = gpuFold(op, acc[i], x[i])
			}
		}
		return acc
	}
	b = pair(count, count)
	if err := load(b.s, in(9, me, count, mpi.Sum)); err != nil {
		return err
	}
	checks = append(checks, check{"IscanGPU", b.r, prefix(9, me, mpi.Sum)})
	if err := post("IscanGPU", func() (*mpi.Request, error) { return mpi.IscanGPU(w, b.s, b.r, mpi.Sum) }); err != nil {
		return err
	}
	b = pair(count, count)
	if err := load(b.s, in(10, me, count, mpi.Max)); err != nil {
		return err
	}
	if me > 0 {
		checks = append(checks, check{"IexscanGPU", b.r, prefix(10, me-1, mpi.Max)})
	}
	if err := post("IexscanGPU", func() (*mpi.Request, error) { return mpi.IexscanGPU(w, b.s, b.r, mpi.Max) }); err != nil {
		return err
	}
	counts, displs, total := vLayout(n, count)
	b = pair(counts[me], total)
	if err := load(b.s, in(11, me, counts[me], mpi.Sum)); err != nil {
		return err
	}
	g.call = base + 12
	bg := g.filler(total, dt)
	if err := load(b.r, bg); err != nil {
		return err
	}
	vb := make([][]float64, n)
	for r := range n {
		vb[r] = in(11, r, counts[r], mpi.Sum)
	}
	checks = append(checks, check{"IallgathervGPU", b.r, place(bg, vb, displs)})
	if err := post("IallgathervGPU", func() (*mpi.Request, error) { return mpi.IallgathervGPU(w, b.s, b.r, counts, displs) }); err != nil {
		return err
	}
	g.call = base + 12
	if _, err := mpi.Waitall(reqs); err != nil {
		return fmt.Errorf("nonblocking GPU collectives %v count %d: %w", dt, count, err)
	}
	for _, c := range checks {
		if err := g.expect(fmt.Sprintf("%s %v count %d", c.what, dt, count), c.b, dt, c.want); err != nil {
			return err
		}
	}
	return nil
}

// caseGPUV: the calls above on every element type; without a GPU, each
// fails with ErrBuffer on every rank and the job goes on.
func caseGPUV(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	if !gpuUsable() {
		return gpuVNoGPU(w)
	}
	g, err := newGPUColl(w)
	if err != nil {
		return err
	}
	seed := []uint64{uint64(time.Now().UnixNano())}
	if err := mpi.Bcast(w, seed, 0); err != nil {
		return err
	}
	g.seed = seed[0]
	const most = 4 << 20 // elements of 8 bytes: beyond every call's needs at np <= 4
	free, err := g.buffers(gpu.Uint8, most*8)
	if err != nil {
		return err
	}
	defer free()
	for _, dt := range gpu.DTypes {
		for _, op := range []mpi.Op{mpi.Sum, mpi.Prod, mpi.Min, mpi.Max} {
			for _, count := range []int{0, 1, 4099} {
				if err := g.scans(dt, op, count); err != nil {
					return err
				}
			}
		}
		for _, base := range []int{0, 1, 4099} {
			if err := g.vforms(dt, base); err != nil {
				return err
			}
			if err := g.inPlaceForms(dt, base, base == 1); err != nil {
				return err
			}
		}
		for _, count := range []int{0, 1, 70001} {
			if err := g.sendrecv(dt, count); err != nil {
				return err
			}
		}
	}
	for _, dt := range []gpu.DType{gpu.Float32, gpu.BFloat16, gpu.Int64, gpu.Uint8} {
		for _, count := range []int{0, 7, 4099, 70001} {
			if err := g.nonblocking(dt, count); err != nil {
				return err
			}
		}
	}
	if len(g.failures) > 0 {
		return fmt.Errorf("rank %d of %d (seed %d): %d of %d results wrong:\n%s", me, n, g.seed, len(g.failures), g.checked, joinLines(g.failures, 10))
	}
	fmt.Printf("rank %d: %d results of the v forms, scans, SendrecvGPU and nonblocking GPU collectives exact (seed %d)\n", me, g.checked, g.seed)
	return nil
}

// gpuVNoGPU: every call of this file on a made-up device pointer, which
// nothing may touch, fails with ErrBuffer at every rank; then a host
// collective works.
func gpuVNoGPU(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	b := gpu.Wrap(0, 0xdead0000, gpu.Float32, 4*n)
	o := gpu.Wrap(0, 0xbeef0000, gpu.Float32, 4*n)
	counts, displs := make([]int, n), make([]int, n)
	for r := range n {
		counts[r], displs[r] = 4, 4*r
	}
	one := o.Slice(0, 4)
	calls := []struct {
		name string
		run  func() error
	}{
		{"SendrecvGPU", func() error {
			_, err := mpi.SendrecvGPU(w, b, (me+1)%n, 3, o, (me-1+n)%n, 3)
			return err
		}},
		{"AllgathervGPU", func() error { return mpi.AllgathervGPU(w, one, b, counts, displs) }},
		{"GathervGPU", func() error { return mpi.GathervGPU(w, one, b, counts, displs, 0) }},
		{"ScattervGPU", func() error { return mpi.ScattervGPU(w, b, counts, displs, one, 0) }},
		{"AlltoallvGPU", func() error { return mpi.AlltoallvGPU(w, b, counts, displs, o, counts, displs) }},
		{"ScanGPU", func() error { return mpi.ScanGPU(w, b, o, mpi.Sum) }},
		{"ExscanGPU", func() error { return mpi.ExscanGPU(w, b, o, mpi.Sum) }},
		{"ReduceScatterGPU", func() error { return mpi.ReduceScatterGPU(w, b, one, counts, mpi.Sum) }},
		{"AlltoallGPU in place", func() error { return mpi.AlltoallGPU(w, gpu.Buffer{}, o) }},
		{"AlltoallvGPU in place", func() error { return mpi.AlltoallvGPU(w, gpu.Buffer{}, nil, nil, o, counts, displs) }},
	}
	nb := []struct {
		name  string
		start func() (*mpi.Request, error)
	}{
		{"IallreduceGPU", func() (*mpi.Request, error) { return mpi.IallreduceGPU(w, b, o, mpi.Sum) }},
		{"IreduceGPU", func() (*mpi.Request, error) { return mpi.IreduceGPU(w, b, o, mpi.Sum, 0) }},
		{"IbcastGPU", func() (*mpi.Request, error) { return mpi.IbcastGPU(w, b, 0) }},
		{"IallgatherGPU", func() (*mpi.Request, error) { return mpi.IallgatherGPU(w, one, b) }},
		{"IallgathervGPU", func() (*mpi.Request, error) { return mpi.IallgathervGPU(w, one, b, counts, displs) }},
		{"IreduceScatterBlockGPU", func() (*mpi.Request, error) { return mpi.IreduceScatterBlockGPU(w, b, one, mpi.Sum) }},
		{"IgatherGPU", func() (*mpi.Request, error) { return mpi.IgatherGPU(w, one, b, 0) }},
		{"IgathervGPU", func() (*mpi.Request, error) { return mpi.IgathervGPU(w, one, b, counts, displs, 0) }},
		{"IscatterGPU", func() (*mpi.Request, error) { return mpi.IscatterGPU(w, b, one, 0) }},
		{"IscattervGPU", func() (*mpi.Request, error) { return mpi.IscattervGPU(w, b, counts, displs, one, 0) }},
		{"IalltoallGPU", func() (*mpi.Request, error) { return mpi.IalltoallGPU(w, b, o) }},
		{"IalltoallvGPU", func() (*mpi.Request, error) { return mpi.IalltoallvGPU(w, b, counts, displs, o, counts, displs) }},
		{"IscanGPU", func() (*mpi.Request, error) { return mpi.IscanGPU(w, b, o, mpi.Sum) }},
		{"IexscanGPU", func() (*mpi.Request, error) { return mpi.IexscanGPU(w, b, o, mpi.Sum) }},
		{"IreduceScatterGPU", func() (*mpi.Request, error) { return mpi.IreduceScatterGPU(w, b, one, counts, mpi.Sum) }},
	}
	for _, c := range calls {
		if err := c.run(); !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("rank %d: %s without a GPU: %v, want ErrBuffer", me, c.name, err)
		}
	}
	for _, c := range nb {
		q, err := c.start()
		if err == nil && q != nil {
			_, err = q.Wait()
		}
		if !errors.Is(err, mpi.ErrBuffer) {
			return fmt.Errorf("rank %d: %s without a GPU: %v, want ErrBuffer", me, c.name, err)
		}
	}
	x := []int{me}
	if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil || x[0] != n*(n-1)/2 {
		return fmt.Errorf("host Allreduce after the GPU errors: %v, %d", err, x[0])
	}
	return nil
}

// TestGPUVForms runs SendrecvGPU, the GPU v forms, scans and nonblocking
// collectives against their references where there is a GPU (np 2 with
// the table, np 2 on one GPU, np 3 with the allgatherv ring, np 2 staged
// over TCP, np 4 on two pretend hosts); without one
// (CI) it checks that every one of them fails with ErrBuffer.
func TestGPUVForms(t *testing.T) {
	if ok, _ := gpu.Available(); !ok {
		job{np: 2, cas: "gpu-v"}.ok(t)
		return
	}
	t.Run("np2", func(t *testing.T) { job{np: 2, cas: "gpu-v"}.ok(t) })
	t.Run("same-gpu", func(t *testing.T) { job{np: 2, cas: "gpu-v", env: []string{"GORUN_TEST_GPU_SAME=1"}}.ok(t) })
	// At np 3 the allgatherv ring (the table picks direct at these sizes).
	t.Run("np3-ring", func(t *testing.T) { job{np: 3, cas: "gpu-v", env: []string{"GORUN_COLL_GPU_ALLGATHERV=ring"}}.ok(t) })
	t.Run("staged-tcp", func(t *testing.T) {
		job{np: 2, cas: "gpu-v", env: []string{"GORUN_CUDA_IPC=none", "GORUN_BTL=tcp,self,cuda"}}.ok(t)
	})
	// Two pretend hosts: the nonblocking collectives through the
	// hierarchical algorithms (coll/gpuhier.go), by rails at every size
	// in the second.
	t.Run("np4-two-hosts", func(t *testing.T) { job{np: 4, cas: "gpu-v", env: []string{"GORUN_FAKE_HOSTS=2"}}.ok(t) })
	t.Run("np4-two-hosts-rails", func(t *testing.T) {
		job{np: 4, cas: "gpu-v", env: []string{"GORUN_FAKE_HOSTS=2", "GORUN_COLL_GPU_HIER_RAIL=1",
			"GORUN_COLL_GPU_HIER_RAIL_ALLGATHER=1", "GORUN_COLL_GPU_HIER_RAIL_REDUCE_SCATTER=1"}}.ok(t)
	})
}
