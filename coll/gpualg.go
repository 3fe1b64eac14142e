package coll

import (
	"github.com/gorun/gorun/gpu"
)

// The GPU algorithms (gpu.go has the machinery). Byte counts are those of
// the device buffers; a.Elem is the element size and a.Counts, where a
// collective uses it, holds its block size n times.

// pieces splits total bytes into pieces of at most GORUN_COLL_GPU_CHUNK
// (32 MiB) whole elements: the pipelined one-shot algorithms reduce piece k
// while piece k+1 is still on its way. Each piece costs a rendezvous, so
// small pieces lose: allreduce of 1 GiB at np 2 took 10.1 ms with 2 MiB
// pieces, 4.07 with 8, 3.17 with 32, 3.04 with 128; of 64 MiB, 281, 239
// and 257 µs with 8, 32 and 128 (MEASUREMENTS.md, GPU collectives).
func pieces(total, elem int) (counts, displs []int) {
	chunk := max(pGPUChunk(), 64<<10)
	k := max(1, (total+chunk-1)/chunk)
	return blocks(total, k, elem)
}

// gpuAllreduceOneshot: every rank sends its whole input to every other and
// reduces the n contributions itself, in rank order, so every rank computes
// the same bits (x0 op x1 op ... op xn-1). One exchange: the latency choice,
// and at n = 2 also the bandwidth one (each rank moves the buffer once each
// way, as a ring does, and reduces it once). Pieces of gpuChunk bytes
// travel as separate messages, each reduced as soon as it is in.
func gpuAllreduceOneshot(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	n, me, size := c.Size(), c.Rank(), a.RecvD.Len()
	// In place, this rank's input is the output; reducing x0 op x1 into it
	// reads each element before writing it, but from rank 2 on the first
	// kernels would overwrite it before its turn: keep a copy.
	keep := d.in && me >= 2
	slots, err := d.take(slotCount(n, keep) * size)
	if err != nil {
		return err
	}
	slot := func(r, off, m int) gpu.Buffer { return bytesOf(slots, slotIndex(r, me, n)*size+off, m) }
	if keep {
		if err := d.copy(slot(me, 0, size), d.own); err != nil {
			return err
		}
	}
	counts, displs := pieces(size, a.Elem)
	ps := make([]pending, len(counts))
	for j := range counts {
		for r := range n {
			if r == me {
				continue
			}
			if err := ps[j].recvD(c, slot(r, displs[j], counts[j]), r); err != nil {
				return err
			}
			if err := ps[j].sendD(c, bytesOf(d.own, displs[j], counts[j]), r); err != nil {
				return err
			}
		}
	}
	for j := range counts {
		if err := ps[j].wait(c); err != nil {
			return err
		}
		x := func(r int) gpu.Buffer {
			if r == me && !keep {
				return bytesOf(d.own, displs[j], counts[j])
			}
			return slot(r, displs[j], counts[j])
		}
		dst := bytesOf(d.rcv, displs[j], counts[j])
		if err := d.reduce(dst, x(0), x(1)); err != nil {
			return err
		}
		for r := 2; r < n; r++ {
			if err := d.reduce(dst, dst, x(r)); err != nil {
				return err
			}
		}
	}
	return d.sync()
}

// slotCount is the scratch slots of a one-shot: one per peer, and one for
// this rank's own input when it must be kept (in place, rank >= 2).
func slotCount(n int, keep bool) int {
	if keep {
		return n
	}
	return n - 1
}

// slotIndex is rank r's slot: peers in rank order, this rank's last.
func slotIndex(r, me, n int) int {
	switch {
	case r == me:
		return n - 1
	case r > me:
		return r - 1
	}
	return r
}

// gpuAllreduceRing: a ring reduce-scatter over n blocks, then a ring
// allgather; each rank moves 2(n-1)/n of the buffer, the bandwidth choice
// from three ranks on.
func gpuAllreduceRing(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	counts, displs := blocks(a.RecvD.Len(), c.Size(), a.Elem)
	if err := d.ringReduceScatter(c, d.rcv, counts, displs, 0); err != nil {
		return err
	}
	return d.ringAllgather(c, d.rcv, gpu.Buffer{}, counts, displs, 1)
}

// ringReduceScatter runs the ring reduce-scatter (schedule.go's, with its
// shift) on work, reading this rank's input from d.own until a step has
// folded a block into work. Afterwards work holds the full reduction of
// block (me+1-shift) mod n, and the stream has passed every kernel.
func (d *devCall) ringReduceScatter(c *Comm, work gpu.Buffer, counts, displs []int, shift int) error {
	n, me := c.Size(), c.Rank()
	blk := func(b gpu.Buffer, i int) gpu.Buffer { return bytesOf(b, displs[i], counts[i]) }
	same := d.own.Ptr() == work.Ptr()
	written := make([]bool, n)
	src := func(i int) gpu.Buffer {
		if same || written[i] {
			return blk(work, i)
		}
		return blk(d.own, i)
	}
	tmp, err := d.take(counts[0])
	if err != nil {
		return err
	}
	to, from := (me+1)%n, (me-1+n)%n
	var p pending
	for k := 0; k < n-1; k++ {
		sb, rb := mod(me-shift-k, n), mod(me-shift-k-1, n)
		t := bytesOf(tmp, 0, counts[rb])
		if err := p.recvD(c, t, from); err != nil {
			return err
		}
		if err := p.sendD(c, src(sb), to); err != nil {
			return err
		}
		if err := p.wait(c); err != nil {
			return err
		}
		if err := d.reduce(blk(work, rb), t, src(rb)); err != nil {
			return err
		}
		written[rb] = true
		// The next step sends this block: a peer's copy engine reads it.
		if err := d.sync(); err != nil {
			return err
		}
	}
	return nil
}

// ringAllgather runs the ring allgather (schedule.go's, with its shift) on
// buf; first, when not empty, is where this rank's own block (me+shift)
// mod n is sent from in the first step (it need not be in buf yet).
func (d *devCall) ringAllgather(c *Comm, buf, first gpu.Buffer, counts, displs []int, shift int) error {
	n, me := c.Size(), c.Rank()
	blk := func(i int) gpu.Buffer { return bytesOf(buf, displs[i], counts[i]) }
	to, from := (me+1)%n, (me-1+n)%n
	var p pending
	for k := 0; k < n-1; k++ {
		sb, rb := mod(me+shift-k, n), mod(me+shift-k-1, n)
		s := blk(sb)
		if k == 0 && first.Len() > 0 {
			s = first
		}
		if err := p.recvD(c, blk(rb), from); err != nil {
			return err
		}
		if err := p.sendD(c, s, to); err != nil {
			return err
		}
		if err := p.wait(c); err != nil {
			return err
		}
	}
	return d.sync()
}

// gpuBcastBinomial: a binomial tree from the root; the root's children
// are sent to at once.
func gpuBcastBinomial(c *Comm, a *Args) error {
	n, me := c.Size(), c.Rank()
	v := mod(me-a.Root, n)
	var p pending
	mask := 1
	for ; mask < n; mask <<= 1 {
		if v&mask != 0 {
			if err := p.recvD(c, a.RecvD, mod(v-mask+a.Root, n)); err != nil {
				return err
			}
			if err := p.wait(c); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < n {
			if err := p.sendD(c, a.RecvD, mod(v+mask+a.Root, n)); err != nil {
				return err
			}
		}
	}
	return p.wait(c)
}

// gpuReduceOneshot: every rank sends its input to the root, which reduces
// the n contributions in rank order.
func gpuReduceOneshot(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	n, me := c.Size(), c.Rank()
	var p pending
	if me != a.Root {
		if err := p.sendD(c, d.own, a.Root); err != nil {
			return err
		}
		return p.wait(c)
	}
	size := d.rcv.Len()
	keep := d.in && me >= 2
	slots, err := d.take(slotCount(n, keep) * size)
	if err != nil {
		return err
	}
	slot := func(r int) gpu.Buffer { return bytesOf(slots, slotIndex(r, me, n)*size, size) }
	if keep {
		if err := d.copy(slot(me), d.own); err != nil {
			return err
		}
	}
	for r := range n {
		if r != me {
			if err := p.recvD(c, slot(r), r); err != nil {
				return err
			}
		}
	}
	if err := p.wait(c); err != nil {
		return err
	}
	x := func(r int) gpu.Buffer {
		if r == me && !keep {
			return d.own
		}
		return slot(r)
	}
	if err := d.reduce(d.rcv, x(0), x(1)); err != nil {
		return err
	}
	for r := 2; r < n; r++ {
		if err := d.reduce(d.rcv, d.rcv, x(r)); err != nil {
			return err
		}
	}
	return d.sync()
}

// gpuReduceRing: a ring reduce-scatter that leaves rank r with block r of
// the result, then every block to the root: 2(n-1)/n of the buffer per
// rank instead of the root's n-1 buffers.
func gpuReduceRing(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	n, me := c.Size(), c.Rank()
	size := d.own.Len()
	work := d.rcv
	if me != a.Root {
		if work, err = d.take(size); err != nil {
			return err
		}
	}
	counts, displs := blocks(size, n, a.Elem)
	if err := d.ringReduceScatter(c, work, counts, displs, 1); err != nil {
		return err
	}
	var p pending
	if me != a.Root {
		if err := p.sendD(c, bytesOf(work, displs[me], counts[me]), a.Root); err != nil {
			return err
		}
		return p.wait(c)
	}
	for r := range n {
		if r != me {
			if err := p.recvD(c, bytesOf(work, displs[r], counts[r]), r); err != nil {
				return err
			}
		}
	}
	return p.wait(c)
}

// gpuAllgatherRing: the ring allgather, this rank's block sent from its
// input while a copy puts it in place.
func gpuAllgatherRing(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	me := c.Rank()
	counts, displs := a.Counts, evenDispls(a.Counts)
	first := gpu.Buffer{}
	if !d.in {
		first = d.own
		if err := d.copy(bytesOf(d.rcv, displs[me], counts[me]), d.own); err != nil {
			return err
		}
	}
	return d.ringAllgather(c, d.rcv, first, counts, displs, 0)
}

// gpuAllgatherDirect: every rank sends its block to every other at once.
func gpuAllgatherDirect(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	n, me := c.Size(), c.Rank()
	counts, displs := a.Counts, evenDispls(a.Counts)
	mine := bytesOf(d.rcv, displs[me], counts[me])
	if d.in {
		d.own = mine
	} else if err := d.copy(mine, d.own); err != nil {
		return err
	}
	var p pending
	for r := range n {
		if r == me {
			continue
		}
		if err := p.recvD(c, bytesOf(d.rcv, displs[r], counts[r]), r); err != nil {
			return err
		}
		if err := p.sendD(c, d.own, r); err != nil {
			return err
		}
	}
	if err := p.wait(c); err != nil {
		return err
	}
	return d.sync()
}

// gpuReduceScatterRing: the ring reduce-scatter into scratch, leaving
// block me, then copied out.
func gpuReduceScatterRing(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	me := c.Rank()
	counts, displs := a.Counts, evenDispls(a.Counts)
	work, err := d.take(sum(counts))
	if err != nil {
		return err
	}
	if err := d.ringReduceScatter(c, work, counts, displs, 1); err != nil {
		return err
	}
	if err := d.copy(bytesOf(d.rcv, 0, counts[me]), bytesOf(work, displs[me], counts[me])); err != nil {
		return err
	}
	return d.sync()
}

// gpuReduceScatterOneshot: block r of every input goes straight to rank
// r, which reduces the n blocks in rank order.
func gpuReduceScatterOneshot(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	n, me := c.Size(), c.Rank()
	counts, displs := a.Counts, evenDispls(a.Counts)
	m := counts[me]
	slots, err := d.take(n * m)
	if err != nil {
		return err
	}
	var p pending
	for r := range n {
		if r == me {
			continue
		}
		if err := p.recvD(c, bytesOf(slots, r*m, m), r); err != nil {
			return err
		}
		if err := p.sendD(c, bytesOf(d.own, displs[r], counts[r]), r); err != nil {
			return err
		}
	}
	if err := p.wait(c); err != nil {
		return err
	}
	x := func(r int) gpu.Buffer {
		if r == me {
			return bytesOf(d.own, displs[me], m)
		}
		return bytesOf(slots, r*m, m)
	}
	dst := bytesOf(d.rcv, 0, m)
	// In place, dst is block 0 of the input: rank 0's first kernel reads
	// each element before writing it; other ranks no longer need block 0.
	if err := d.reduce(dst, x(0), x(1)); err != nil {
		return err
	}
	for r := 2; r < n; r++ {
		if err := d.reduce(dst, dst, x(r)); err != nil {
			return err
		}
	}
	return d.sync()
}

// gpuGatherLinear: the root receives every block at once.
func gpuGatherLinear(c *Comm, a *Args) error {
	return gpuRooted(c, a, true)
}

// gpuScatterLinear: the root sends every block at once.
func gpuScatterLinear(c *Comm, a *Args) error {
	return gpuRooted(c, a, false)
}

// gpuRooted runs a linear gather (toRoot) or scatter: the root's buffer
// (RecvD for a gather, SendD for a scatter) holds n blocks of a.Counts;
// every other rank's holds one. A zero buffer at the root is MPI's in place
// (its own block is already where it belongs).
func gpuRooted(c *Comm, a *Args, toRoot bool) error {
	n, me := c.Size(), c.Rank()
	counts, displs := a.Counts, evenDispls(a.Counts)
	var p pending
	if me != a.Root {
		if toRoot {
			if err := p.sendD(c, a.SendD, a.Root); err != nil {
				return err
			}
		} else if err := p.recvD(c, a.RecvD, a.Root); err != nil {
			return err
		}
		return p.wait(c)
	}
	whole, mine := a.RecvD, a.SendD
	if !toRoot {
		whole, mine = a.SendD, a.RecvD
	}
	for r := range n {
		b := bytesOf(whole, displs[r], counts[r])
		var err error
		switch {
		case r == me:
			continue
		case toRoot:
			err = p.recvD(c, b, r)
		default:
			err = p.sendD(c, b, r)
		}
		if err != nil {
			return err
		}
	}
	if mine.Len() > 0 {
		d, err := newDevCall(a)
		if err != nil {
			return err
		}
		own := bytesOf(whole, displs[me], counts[me])
		if toRoot {
			err = d.copy(own, mine)
		} else {
			err = d.copy(mine, own)
		}
		if err != nil {
			return err
		}
		if err := d.sync(); err != nil {
			return err
		}
	}
	return p.wait(c)
}

// gpuAlltoallLinear: every block to its rank at once.
func gpuAlltoallLinear(c *Comm, a *Args) (err error) {
	d, err := newDevCall(a)
	if err != nil {
		return err
	}
	defer func() { d.done(err) }()
	n, me := c.Size(), c.Rank()
	counts, displs := a.Counts, evenDispls(a.Counts)
	var p pending
	for r := range n {
		if r == me {
			continue
		}
		if err := p.recvD(c, bytesOf(d.rcv, displs[r], counts[r]), r); err != nil {
			return err
		}
		if err := p.sendD(c, bytesOf(d.own, displs[r], counts[r]), r); err != nil {
			return err
		}
	}
	if err := d.copy(bytesOf(d.rcv, displs[me], counts[me]), bytesOf(d.own, displs[me], counts[me])); err != nil {
		return err
	}
	if err := p.wait(c); err != nil {
		return err
	}
	return d.sync()
}

// evenDispls is the offsets of consecutive blocks of counts.
func evenDispls(counts []int) []int {
	d := make([]int, len(counts))
	for i := 1; i < len(counts); i++ {
		d[i] = d[i-1] + counts[i-1]
	}
	return d
}
