package coll

import (
	"fmt"
	"sync"

	"github.com/gorun/gorun/gpu"
	"github.com/gorun/gorun/gpu/cuda"
	"github.com/gorun/gorun/p2p"
)

// ringReduceScatter runs the ring reduce-scatter (schedule.go's, with its
// shift) on work, reading this rank's input from d.own until a step has
// folded a block into work. Afterwards work holds the full reduction of
// block (me+1-shift) mod n, and the stream has passed every kernel.
//
// Each step moves its block in pieces (ringPieces): a piece is folded as
// soon as it is in, and goes on to the next rank (the next step) as soon
// as its fold has passed, so the link carries the next pieces while the
// kernels fold the earlier ones. A step used to fold its whole block after
// the whole block was in, the link idle meanwhile: on 4 H100 the ring
// allreduce of 1 GiB took 1.11x NCCL's time that way (MEASUREMENTS.md,
// GPU collectives at four ranks). The next step's receive of a piece is
// posted when the fold that read its slot has passed, with the send of
// that fold's piece.
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
	np, esz := ringPieces(counts[0]), d.dt.Size()
	// Piece j of every step lands in slot j of tmp (the first piece of
	// the largest block is the largest piece), received again only once
	// the fold that read it has passed.
	pc0, _ := blocks(counts[0], np, esz)
	tmp, err := d.take(np * pc0[0])
	if err != nil {
		return err
	}
	slot := func(j, m int) gpu.Buffer { return bytesOf(tmp, j*pc0[0], m) }
	evs, err := d.events(np)
	if err != nil {
		return err
	}
	to, from := (me+1)%n, (me-1+n)%n
	// recv posts step k's piece j (of block me-shift-k-1) into rs[j].
	recv := func(k, j int, rs []*p2p.Request) error {
		pc, _ := blocks(counts[mod(me-shift-k-1, n)], np, esz)
		r, err := c.irecvMem(devMem(slot(j, pc[j])), from)
		rs[j] = r
		return err
	}
	var sends pending
	recvs, next := make([]*p2p.Request, np), make([]*p2p.Request, np)
	sb := mod(me-shift, n)
	pc, pd := blocks(counts[sb], np, esz)
	for j := range np {
		if err := recv(0, j, recvs); err != nil {
			return err
		}
		if err := sends.sendD(c, bytesOf(src(sb), pd[j], pc[j]), to); err != nil {
			return err
		}
	}
	for k := 0; k < n-1; k++ {
		rb := mod(me-shift-k-1, n)
		last := k == n-2
		pc, pd := blocks(counts[rb], np, esz)
		piece := func(b gpu.Buffer, j int) gpu.Buffer { return bytesOf(b, pd[j], pc[j]) }
		// sent: the pieces of this step's block already sent on (and
		// their slots given to the next step's receives); the next one,
		// up to the folds queued (upto: their events are this step's),
		// goes once its fold has passed (wait: block until it has, else
		// only look).
		sent := 0
		sendOn := func(upto int, wait bool) error {
			for ; sent < upto; sent++ {
				if wait {
					if err := c.awaitEvent(evs[sent]); err != nil {
						return err
					}
				} else if ok, err := evs[sent].Done(); err != nil {
					return fmt.Errorf("GPU collective: %w", err)
				} else if !ok {
					return nil
				}
				if err := recv(k+1, sent, next); err != nil {
					return err
				}
				if err := sends.sendD(c, piece(blk(work, rb), sent), to); err != nil {
					return err
				}
			}
			return nil
		}
		for j := range np {
			if err := c.waitRecv(recvs[j], from, pc[j]); err != nil {
				return err
			}
			if err := d.reduce(piece(blk(work, rb), j), slot(j, pc[j]), piece(src(rb), j)); err != nil {
				return err
			}
			if err := evs[j].Record(d.s); err != nil {
				return fmt.Errorf("GPU collective: %w", err)
			}
			if !last {
				if err := sendOn(j+1, false); err != nil {
					return err
				}
			}
		}
		written[rb] = true
		if !last {
			if err := sendOn(np, true); err != nil {
				return err
			}
		}
		recvs, next = next, recvs
	}
	if err := sends.wait(c); err != nil {
		return err
	}
	return d.sync()
}

// ringPieces is how many pieces a ring step cuts a block of size bytes
// into: pieces of about GORUN_COLL_GPU_RING_PIECE, at most 16.
func ringPieces(size int) int {
	return min(max(size/gpuRingPiece(), 1), 16)
}

// gpuRingPiece is GORUN_COLL_GPU_RING_PIECE (at least 4 KiB), read once.
var gpuRingPiece = sync.OnceValue(func() int { return max(pGPURingPiece(), 4<<10) })

// awaitEvent polls the engine until ev has passed: the transfers in flight
// (the pieces of a pipelined step) go on meanwhile, which a blocking
// cuEventSynchronize would hold up. A kernel ends on its own, so the wait
// needs no abort check.
func (c *Comm) awaitEvent(ev *cuda.Event) error {
	for {
		ok, err := ev.Done()
		if err != nil {
			return fmt.Errorf("GPU collective: %w", err)
		}
		if ok {
			return nil
		}
		c.E.Progress()
	}
}

// devEvents keeps the GPU algorithms' events by device: an algorithm takes
// them through devCall.events, and done gives them back.
var devEvents struct {
	sync.Mutex
	free map[int][]*cuda.Event
}

// events returns k events of the call's device, given back by done.
func (d *devCall) events(k int) ([]*cuda.Event, error) {
	devEvents.Lock()
	l := devEvents.free[d.dev]
	m := min(k, len(l))
	evs := append([]*cuda.Event(nil), l[len(l)-m:]...)
	if m > 0 {
		devEvents.free[d.dev] = l[:len(l)-m]
	}
	devEvents.Unlock()
	for len(evs) < k {
		ev, err := d.s.Context().NewEvent(cuda.EventDisableTiming)
		if err != nil {
			d.evs = append(d.evs, evs...)
			return nil, fmt.Errorf("GPU collective: %w", err)
		}
		evs = append(evs, ev)
	}
	d.evs = append(d.evs, evs...)
	return evs, nil
}

// putEvents gives the call's events back (done, once the stream has passed
// every kernel: none is pending).
func (d *devCall) putEvents() {
	if len(d.evs) == 0 {
		return
	}
	devEvents.Lock()
	if devEvents.free == nil {
		devEvents.free = map[int][]*cuda.Event{}
	}
	devEvents.free[d.dev] = append(devEvents.free[d.dev], d.evs...)
	devEvents.Unlock()
	d.evs = nil
}
