package mpi

import (
	"errors"
	"unsafe"

	"github.com/gorun/gorun/coll"
	"golang.org/x/sys/unix"
)

// Shared-memory windows (MPI_Win_allocate_shared, MPI_Win_shared_query).
//
// Every rank's part of the window lives in one segment of shared memory
// that every rank of the communicator maps, so that a rank may load from
// and store to any rank's part directly (SharedQuery), besides the
// window's Put, Get and accumulates, which work on it as on any window.
// The parts are laid out in rank order, each starting on a 64-byte line
// (MPI's default: contiguous, but a line apart so that two ranks' parts
// never share one). Direct loads and stores follow MPI's unified memory
// model: order them with the window's synchronization (Fence, Lock/Unlock,
// Sync together with a Barrier or another message), as for any memory
// shared between processes.
//
// Set-up: coll's MapShared (rank 0 creates /dev/shm/gorun-<job>-win-...,
// removed by gorun's reaper whatever happens, every rank maps it, every
// rank learns whether all could, rank 0 unlinks it); the mapping goes away
// at Free.

// WinAllocateShared makes a window of n zeroed elements at this rank in
// memory that every rank of c can address directly (MPI_Win_allocate_shared):
// Local is this rank's part, SharedQuery any rank's. Ranks may pass
// different n, including 0. c's ranks must all run on one host (split the
// world with SplitType(TypeShared) first): otherwise every rank fails with
// ErrComm. A negative n at any rank fails the call at every rank with
// ErrArg. Free unmaps the memory: slices from Local and SharedQuery must
// not be used after it. Collective over c.
func WinAllocateShared[T Element](c *Comm, n int) (_ *Win[T], err error) {
	defer c.failTo(&err)
	w, err := allocShared[T](c, n, "WinAllocateShared")
	if err != nil {
		return nil, err
	}
	w.queryable, w.flavor = true, FlavorShared
	return w, nil
}

// allocShared makes a window of n elements per rank in one shared
// segment, for the call named op (WinAllocateShared, and WinAllocate
// within a host).
func allocShared[T Element](c *Comm, n int, op string) (*Win[T], error) {
	if err := c.check(op); err != nil {
		return nil, err
	}
	if err := c.intra(op); err != nil {
		return nil, err
	}
	// Every rank's length, and whether it has the one-sided paths on:
	// WinAllocate makes a shared window only if all have (the same
	// answer at every rank, so the same collectives follow).
	sizes, oneSided, err := winSizes(c, n)
	if err != nil {
		return nil, reop(op, err)
	}
	for r, s := range sizes {
		if s < 0 {
			return nil, errorf(ErrArg, op, "rank %d asked for %d elements", r, s)
		}
	}
	if !oneSided && op == "WinAllocate" {
		return nil, errNotOneSided
	}
	if c.cc.Nodes != 1 {
		return nil, errorf(ErrComm, op, "the ranks of %s run on %d hosts: shared memory needs one (SplitType(TypeShared) first)", c.name, c.cc.Nodes)
	}
	es := elemSize[T]()
	offs := make([]int, len(sizes)+1)
	for r, s := range sizes {
		offs[r+1] = offs[r] + (int(s)*es+63)&^63
	}
	// After the parts, two cache lines per rank for the locks of its part
	// (win_direct.go: accumulates, passive-target epochs).
	locks := offs[len(sizes)]
	mem, err := mapShared(c, op, locks+partLocks*len(sizes))
	if err != nil {
		return nil, err
	}
	parts := make([][]T, len(sizes))
	for r, s := range sizes {
		if s > 0 {
			parts[r] = unsafe.Slice((*T)(unsafe.Pointer(&mem[offs[r]])), int(s))
		}
	}
	w, err := newWin(c, op, parts[c.rank], false, &sharedParts[T]{parts: parts, mem: mem, locks: mem[locks:], sizes: sizes, oneSided: oneSided})
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return w, nil
}

// errNotOneSided: WinAllocate within a host with the one-sided paths off
// at some rank makes a window of private parts (win.go).
var errNotOneSided = errors.New("one-sided paths off")

// mapShared maps a zeroed segment of size bytes shared by c's ranks
// (coll's MapShared, as a collective call of its own): every rank fails
// alike, with ErrNoMem if some rank could not make or map it.
func mapShared(c *Comm, op string, size int) ([]byte, error) {
	v, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	var mem []byte
	cl := call{fn: func(v *coll.Comm, _ *coll.Args) error {
		var err error
		mem, err = v.MapShared("win", size)
		return err
	}}
	if err := finishCall(op, &v, &cl, nil); err != nil {
		if errors.Is(err, coll.ErrNoShared) {
			return nil, errorf(ErrNoMem, op, "shared memory for the window: %w", err)
		}
		return nil, err
	}
	return mem, nil
}

// SharedQuery returns rank's part of a shared window (MPI_Win_shared_query):
// a slice of that rank's elements, in memory this rank may load from and
// store to directly (nil for a rank whose part is empty). It fails with
// ErrWin on a window that WinAllocateShared did not make, and ErrRank for
// a rank outside the window's communicator.
func (w *Win[T]) SharedQuery(rank int) (_ []T, err error) {
	defer w.failTo(&err)
	const op = "Win.SharedQuery"
	if err := w.live(op); err != nil {
		return nil, err
	}
	if !w.queryable {
		return nil, errorf(ErrWin, op, "%s is not a shared-memory window (WinAllocateShared makes them)", w.name)
	}
	if rank < 0 || rank >= len(w.shared) {
		return nil, errorf(ErrRank, op, "rank %d is not in %s (size %d)", rank, w.name, len(w.shared))
	}
	return w.shared[rank], nil
}
