package mpi

import (
	"math/bits"
	"sync"
)

// Context ids. Every communicator has two: ctx for point-to-point traffic
// and ctx+1 for its collectives (MPI_COMM_WORLD uses 0 and 1,
// MPI_COMM_SELF 2 and 3, the others ctxBase + 2*pair). A new
// communicator's pair must be free at every process of its parent, and
// constructors may run at once from several goroutines on different
// (overlapping) parents, in a different order at each process
// (MPI_THREAD_MULTIPLE). gorun agrees on the pair the way MPICH does
// (Gropp et al., "Multi-threaded context id allocation"):
//
//   - each process keeps a mask of its free pairs; a constructor
//     contributes the mask to a bitwise-and Allreduce over the parent and
//     takes the lowest pair free everywhere;
//   - one constructor at a time holds a process's mask; a constructor
//     that cannot hold it contributes zeros, the result is then empty at
//     every member and they all try again;
//   - a process gives its mask only to the waiting constructor whose
//     parent has the lowest context id, so the lowest one in the whole
//     job finds the masks of all its members, and every round ends with
//     one constructor done: no livelock.
//
// One extra word of the reduction tells whether every member held its
// mask (then an empty result means no pair is free everywhere), another
// whether any member has pairs in quarantine. A pair freed by Comm.Free
// (or agreed by a process that gets no communicator) waits in a
// quarantine of ctxQuarantine pairs before it is offered again, so that a
// late message of the old communicator is not matched by the new one
// while the program frees and creates communicators in a loop; the
// quarantine is emptied only when nothing else is free. A pair leaving the
// quarantine is purged first (purge: p2p's Engine.Purge of both contexts):
// messages the old communicator left unreceived are dropped and receives
// still posted on it fail, so that the next communicator given the pair
// does not match them.
const (
	ctxBase       = 4
	ctxWords      = 64 // 4096 communicators alive at once
	ctxQuarantine = 256
)

// ctxAlloc is this process's share of the agreement.
type ctxAlloc struct {
	mu      sync.Mutex
	free    [ctxWords]uint64 // bit set: pair free here
	held    bool             // a constructor holds free for its round
	waiting map[uint64]int   // constructor's key (ctxKey) -> constructors in agreeCtx
	quar    []int            // released pairs, oldest first
	// purge readies a context of a pair leaving the quarantine (set by
	// Init: the engine's Purge); nil before.
	purge func(ctx uint32)
}

var ctxs = func() *ctxAlloc {
	a := &ctxAlloc{waiting: map[uint64]int{}}
	for i := range a.free {
		a.free[i] = ^uint64(0)
	}
	return a
}()

// ctxKey is the key of a constructor over the parent with context parent:
// the parent's context, then sub (CreateGroup's tag, plus one), which
// orders constructors over one parent that may run at once.
func ctxKey(parent uint32, sub uint32) uint64 { return uint64(parent)<<32 | uint64(sub) }

// idupKey is the key of an Idup over the parent with context parent,
// begun as the parent's collective call seq: above every CreateGroup's
// (whose sub is its tag plus one, at most TagUB+1), and ordered by the
// calls' sequence numbers, so that two Idups of one parent in progress at
// once (a helper running the earlier one's rounds while the caller runs
// the later one's in its Waitall) are ordered alike at every process.
// With one key for both, each process gave its mask to whichever asked
// first: where that differed between processes every round's result was
// empty for both, for ever (TestIdup at np=3 hung in 3 runs of 6 once
// Init set the world's shared memory up and the two Idups came to
// overlap). The blocking constructors' key (sub 0) stays the lowest.
func idupKey(parent uint32, seq uint64) uint64 {
	return ctxKey(parent, 1<<31+1+uint32(seq%(1<<31-1)))
}

// enter and leave bracket a constructor with key parent (ctxKey).
func (a *ctxAlloc) enter(parent uint64) {
	a.mu.Lock()
	a.waiting[parent]++
	a.mu.Unlock()
}

func (a *ctxAlloc) leave(parent uint64) {
	a.mu.Lock()
	if a.waiting[parent]--; a.waiting[parent] == 0 {
		delete(a.waiting, parent)
	}
	a.mu.Unlock()
}

// contribute fills buf (ctxWords+2 words) with this round's contribution
// of the constructor with key parent: the free mask and 1 when it may hold
// the mask, zeros otherwise; the last word is 1 when the quarantine is
// empty. It reports whether the constructor now holds the mask.
func (a *ctxAlloc) contribute(parent uint64, buf []uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	hold := !a.held
	for p := range a.waiting {
		if p < parent {
			hold = false
		}
	}
	clear(buf)
	if hold {
		a.held = true
		copy(buf, a.free[:])
		buf[ctxWords] = 1
	}
	if len(a.quar) == 0 {
		buf[ctxWords+1] = 1
	}
	return hold
}

// finish ends a round: it takes pair (>= 0) out of the mask, and, when
// flush, returns the quarantine to it. A held mask is given up only after
// the quarantine is back, so that no constructor meanwhile finds neither.
func (a *ctxAlloc) finish(held bool, pair int, flush bool) {
	a.mu.Lock()
	if pair >= 0 {
		a.free[pair/64] &^= 1 << (pair % 64)
	}
	var back []int
	if flush {
		back, a.quar = a.quar, nil
	}
	a.mu.Unlock()
	a.reopen(back...)
	if held {
		a.mu.Lock()
		a.held = false
		a.mu.Unlock()
	}
}

// release puts the pair of ctx in quarantine, and the oldest quarantined
// pair back into the mask once there are more than ctxQuarantine.
func (a *ctxAlloc) release(ctx uint32) {
	if ctx < ctxBase {
		return
	}
	a.mu.Lock()
	a.quar = append(a.quar, int(ctx-ctxBase)/2)
	q := -1
	if len(a.quar) > ctxQuarantine {
		q = a.quar[0]
		a.quar = a.quar[1:]
	}
	a.mu.Unlock()
	if q >= 0 {
		a.reopen(q)
	}
}

// reopen purges the contexts of pairs that leave the quarantine, then
// puts them back into the mask. Between the two a pair is neither
// quarantined nor free: no constructor can take it before its purge.
func (a *ctxAlloc) reopen(pairs ...int) {
	if len(pairs) == 0 {
		return
	}
	a.mu.Lock()
	purge := a.purge
	a.mu.Unlock()
	if purge != nil {
		for _, p := range pairs {
			ctx := ctxBase + 2*uint32(p)
			purge(ctx)
			purge(ctx + 1)
		}
	}
	a.mu.Lock()
	for _, p := range pairs {
		a.free[p/64] |= 1 << (p % 64)
	}
	a.mu.Unlock()
}

// agreeCtx agrees with every process of c on a context pair free at all
// of them, and takes it. Collective over c.
func (c *Comm) agreeCtx(op string) (uint32, error) {
	return c.agreeCtxBy(op, func(buf []uint64) error { return Allreduce(c, buf, buf, Band) })
}

// agreeCtxBy is agreeCtx with the bitwise-and Allreduce over c done by
// band (Idup's runs inside the one collective call it began; Shrink's
// goes through gorun and skips failed members).
func (c *Comm) agreeCtxBy(op string, band func(buf []uint64) error) (uint32, error) {
	if err := c.intra(op); err != nil {
		return 0, err
	}
	return c.agreeCtxKey(op, ctxKey(c.ctx, 0), band)
}

// agreeCtxKey is agreeCtxBy for a constructor with key key (ctxKey) whose
// band may reach beyond c: IntercommCreate's reaches the other group,
// CreateGroup's only the group's members, and Merge's is over both groups
// of the intercommunicator c.
func (c *Comm) agreeCtxKey(op string, key uint64, band func(buf []uint64) error) (uint32, error) {
	ctxs.enter(key)
	defer ctxs.leave(key)
	buf := make([]uint64, ctxWords+2)
	for {
		held := ctxs.contribute(key, buf)
		if err := band(buf); err != nil {
			ctxs.finish(held, -1, false)
			return 0, reop(op, err)
		}
		if buf[ctxWords] == 0 {
			// Some member's mask was held by another constructor.
			ctxs.finish(held, -1, false)
			continue
		}
		pair := -1
		for i, w := range buf[:ctxWords] {
			if w != 0 {
				pair = 64*i + bits.TrailingZeros64(w)
				break
			}
		}
		if pair >= 0 {
			ctxs.finish(held, pair, false)
			return ctxBase + 2*uint32(pair), nil
		}
		if buf[ctxWords+1] == 1 {
			ctxs.finish(held, -1, false)
			return 0, errorf(ErrOther, op, "no context id is free at every process of %s: %d communicators are alive (free some)", c.name, 64*ctxWords)
		}
		// Only quarantined pairs are left somewhere: every member
		// returns its quarantine and tries again.
		ctxs.finish(held, -1, true)
	}
}
