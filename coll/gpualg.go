package coll

import (
	"sync"

	"github.com/gorun/gorun/btl"
	"github.com/gorun/gorun/gpu"
)

// The GPU algorithms (gpu.go has the machinery). Byte counts are those of
// the device buffers; a.Elem is the element size and a.Counts, where a
// collective uses it, holds its block size n times. Each is registered
// through gpuAlg, which hands it the call's devCall and gives the scratch
// back when it returns.

// gpuAlg makes an algorithm of f: it prepares the call's devCall and
// releases it (done) with f's outcome.
func gpuAlg(f func(*Comm, *Args, *devCall) error) func(*Comm, *Args) error {
	return func(c *Comm, a *Args) error {
		d, err := newDevCall(a)
		if err != nil {
			return err
		}
		err = f(c, a, d)
		d.done(err)
		return err
	}
}

// everyPeer posts, for every other rank r, a receive into recv(r) and a
// send of send(r); a nil function posts none of its kind.
func (p *pending) everyPeer(c *Comm, recv, send func(r int) btl.Mem) error {
	for r := range c.Size() {
		if r == c.Rank() {
			continue
		}
		if recv != nil {
			if err := p.recvMem(c, recv(r), r); err != nil {
				return err
			}
		}
		if send != nil {
			if err := p.sendMem(c, send(r), r); err != nil {
				return err
			}
		}
	}
	return nil
}

// swapD receives rb from rank from while it sends sb to rank to, and waits
// for both (one step of a ring).
func (p *pending) swapD(c *Comm, rb gpu.Buffer, from int, sb gpu.Buffer, to int) error {
	if err := p.recvD(c, rb, from); err != nil {
		return err
	}
	if err := p.sendD(c, sb, to); err != nil {
		return err
	}
	return p.wait(c)
}

// pieces splits total bytes into pieces of at most GORUN_COLL_GPU_CHUNK
// (32 MiB) whole elements: the pipelined one-shot algorithms reduce piece k
// while piece k+1 is still on its way. Each piece costs a rendezvous, so
// small pieces lose: allreduce of 1 GiB at np 2 took 10.1 ms with 2 MiB
// pieces, 4.07 with 8, 3.17 with 32, 3.04 with 128; of 64 MiB, 281, 239
// and 257 µs with 8, 32 and 128 (MEASUREMENTS.md, GPU collectives).
func pieces(total, elem int) (counts, displs []int) {
	chunk := gpuChunk()
	k := max(1, (total+chunk-1)/chunk)
	return blocks(total, k, elem)
}

// gpuChunk is GORUN_COLL_GPU_CHUNK (at least 64 KiB), read once.
var gpuChunk = sync.OnceValue(func() int { return max(pGPUChunk(), 64<<10) })

// oneshot sends this rank's input to every rank that reduces (every rank,
// or only root when root >= 0), in pieces, and at a reducing rank reduces
// the n inputs into d.rcv in rank order, each piece as soon as it is in,
// so every reducing rank computes the same bits (x0 op x1 op ... op xn-1).
func (d *devCall) oneshot(c *Comm, a *Args, root int) error {
	n, me, size := c.Size(), c.Rank(), d.own.Len()
	counts, displs := pieces(size, a.Elem)
	piece := func(b gpu.Buffer, j int) gpu.Buffer { return bytesOf(b, displs[j], counts[j]) }
	ps := make([]pending, len(counts))
	if root >= 0 && me != root {
		for j := range counts {
			if err := ps[j].sendD(c, piece(d.own, j), root); err != nil {
				return err
			}
		}
		for j := range ps {
			if err := ps[j].wait(c); err != nil {
				return err
			}
		}
		return nil
	}
	// In place, this rank's input is the output; reducing x0 op x1 into it
	// reads each element before writing it, but from rank 2 on the first
	// kernels would overwrite it before its turn: keep a copy.
	keep := d.in && me >= 2
	slots, err := d.take(slotCount(n, keep) * size)
	if err != nil {
		return err
	}
	slot := func(r, j int) gpu.Buffer { return piece(bytesOf(slots, slotIndex(r, me, n)*size, size), j) }
	if keep {
		if err := d.copy(bytesOf(slots, (n-1)*size, size), d.own); err != nil {
			return err
		}
	}
	var send func(r int) btl.Mem
	for j := range counts {
		if root < 0 {
			send = func(int) btl.Mem { return devMem(piece(d.own, j)) }
		}
		if err := ps[j].everyPeer(c, func(r int) btl.Mem { return devMem(slot(r, j)) }, send); err != nil {
			return err
		}
	}
	for j := range counts {
		if err := ps[j].wait(c); err != nil {
			return err
		}
		if err := d.reduceAll(n, piece(d.rcv, j), func(r int) gpu.Buffer {
			if r == me && !keep {
				return piece(d.own, j)
			}
			return slot(r, j)
		}); err != nil {
			return err
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

// gpuAllreduceOneshot: every rank sends its whole input to every other and
// reduces the n contributions itself. One exchange: the latency choice,
// and at n = 2 also the bandwidth one (each rank moves the buffer once each
// way, as a ring does, and reduces it once).
func gpuAllreduceOneshot(c *Comm, a *Args, d *devCall) error { return d.oneshot(c, a, -1) }

// gpuReduceOneshot: every rank sends its input to the root, which reduces
// the n contributions in rank order.
func gpuReduceOneshot(c *Comm, a *Args, d *devCall) error { return d.oneshot(c, a, a.Root) }

// gpuAllreduceRing: a ring reduce-scatter over n blocks, then a ring
// allgather; each rank moves 2(n-1)/n of the buffer, the bandwidth choice
// from three ranks on.
func gpuAllreduceRing(c *Comm, a *Args, d *devCall) error {
	counts, displs := blocks(a.RecvD.Len(), c.Size(), a.Elem)
	if err := d.ringReduceScatter(c, d.rcv, counts, displs, 0); err != nil {
		return err
	}
	return d.ringAllgather(c, d.rcv, gpu.Buffer{}, counts, displs, 1)
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
		if err := p.swapD(c, blk(rb), from, s, to); err != nil {
			return err
		}
	}
	return d.sync()
}

// gpuBcastBinomial: a binomial tree from the root; the root's children
// are sent to at once.
func gpuBcastBinomial(c *Comm, a *Args, _ *devCall) error {
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

// gpuReduceRing: a ring reduce-scatter that leaves rank r with block r of
// the result, then every block to the root: 2(n-1)/n of the buffer per
// rank instead of the root's n-1 buffers.
func gpuReduceRing(c *Comm, a *Args, d *devCall) error {
	n, me := c.Size(), c.Rank()
	size := d.own.Len()
	work := d.rcv
	if me != a.Root {
		var err error
		if work, err = d.take(size); err != nil {
			return err
		}
	}
	counts, displs := blocks(size, n, a.Elem)
	if err := d.ringReduceScatter(c, work, counts, displs, 1); err != nil {
		return err
	}
	blk := func(r int) gpu.Buffer { return bytesOf(work, displs[r], counts[r]) }
	var p pending
	var err error
	if me != a.Root {
		err = p.sendD(c, blk(me), a.Root)
	} else {
		err = p.everyPeer(c, func(r int) btl.Mem { return devMem(blk(r)) }, nil)
	}
	if err != nil {
		return err
	}
	return p.wait(c)
}

// gpuAllgatherRing: the ring allgather, this rank's block sent from its
// input while a copy puts it in place.
func gpuAllgatherRing(c *Comm, a *Args, d *devCall) error {
	me := c.Rank()
	counts, displs := a.Counts, displsOf(a)
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
func gpuAllgatherDirect(c *Comm, a *Args, d *devCall) error {
	me := c.Rank()
	counts, displs := a.Counts, displsOf(a)
	mine := bytesOf(d.rcv, displs[me], counts[me])
	if d.in {
		d.own = mine
	} else if err := d.copy(mine, d.own); err != nil {
		return err
	}
	var p pending
	if err := p.everyPeer(c,
		func(r int) btl.Mem { return devMem(bytesOf(d.rcv, displs[r], counts[r])) },
		func(int) btl.Mem { return devMem(d.own) }); err != nil {
		return err
	}
	if err := p.wait(c); err != nil {
		return err
	}
	return d.sync()
}

// gpuReduceScatterRing: the ring reduce-scatter into scratch, leaving
// block me, then copied out.
func gpuReduceScatterRing(c *Comm, a *Args, d *devCall) error {
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
func gpuReduceScatterOneshot(c *Comm, a *Args, d *devCall) error {
	n, me := c.Size(), c.Rank()
	counts, displs := a.Counts, evenDispls(a.Counts)
	m := counts[me]
	slots, err := d.take(n * m)
	if err != nil {
		return err
	}
	var p pending
	if err := p.everyPeer(c,
		func(r int) btl.Mem { return devMem(bytesOf(slots, r*m, m)) },
		func(r int) btl.Mem { return devMem(bytesOf(d.own, displs[r], counts[r])) }); err != nil {
		return err
	}
	if err := p.wait(c); err != nil {
		return err
	}
	// In place, the output is block 0 of the input: rank 0's first kernel
	// reads each element before writing it; other ranks no longer need it.
	if err := d.reduceAll(n, bytesOf(d.rcv, 0, m), func(r int) gpu.Buffer {
		if r == me {
			return bytesOf(d.own, displs[me], m)
		}
		return bytesOf(slots, r*m, m)
	}); err != nil {
		return err
	}
	return d.sync()
}

// gpuGatherLinear: the root receives every block at once.
func gpuGatherLinear(c *Comm, a *Args, d *devCall) error { return gpuRooted(c, a, d, true) }

// gpuScatterLinear: the root sends every block at once.
func gpuScatterLinear(c *Comm, a *Args, d *devCall) error { return gpuRooted(c, a, d, false) }

// gpuRooted runs a linear gather (toRoot) or scatter: the root's buffer
// (RecvD for a gather, SendD for a scatter) holds n blocks of a.Counts;
// every other rank's holds one. A zero buffer at the root is MPI's in place
// (its own block is already where it belongs).
func gpuRooted(c *Comm, a *Args, d *devCall, toRoot bool) error {
	me := c.Rank()
	var p pending
	if me != a.Root {
		var err error
		if toRoot {
			err = p.sendD(c, a.SendD, a.Root)
		} else {
			err = p.recvD(c, a.RecvD, a.Root)
		}
		if err != nil {
			return err
		}
		return p.wait(c)
	}
	counts, displs := a.Counts, displsOf(a)
	whole, mine := a.RecvD, a.SendD
	if !toRoot {
		whole, mine = a.SendD, a.RecvD
	}
	blk := func(r int) btl.Mem { return devMem(bytesOf(whole, displs[r], counts[r])) }
	var err error
	if toRoot {
		err = p.everyPeer(c, blk, nil)
	} else {
		err = p.everyPeer(c, nil, blk)
	}
	if err != nil {
		return err
	}
	if mine.Len() > 0 {
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

// gpuAlltoallLinear: every block to its rank at once (Alltoall, and
// Alltoallv with a.SendCounts and a.SendDispls for the send side).
func gpuAlltoallLinear(c *Comm, a *Args, d *devCall) error {
	me := c.Rank()
	counts, displs := a.Counts, displsOf(a)
	scounts, sdispls := counts, displs
	if a.SendCounts != nil {
		scounts, sdispls = a.SendCounts, a.SendDispls
	}
	rblk := func(r int) gpu.Buffer { return bytesOf(d.rcv, displs[r], counts[r]) }
	sblk := func(r int) gpu.Buffer { return bytesOf(d.own, sdispls[r], scounts[r]) }
	var p pending
	if err := p.everyPeer(c,
		func(r int) btl.Mem { return devMem(rblk(r)) },
		func(r int) btl.Mem { return devMem(sblk(r)) }); err != nil {
		return err
	}
	if err := d.copy(rblk(me), sblk(me)); err != nil {
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
