package mpi

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"github.com/gorun/gorun/coll"
	"github.com/gorun/gorun/internal/shmseg"
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
// Set-up: rank 0 creates /dev/shm/gorun-<job>-win-<pid>-<n> (removed by
// gorun's reaper whatever happens), broadcasts its name, every rank maps
// it, every rank learns whether all could, and rank 0 unlinks the file;
// the mapping goes away at Free.

// winSegments numbers the shared windows this process creates (their
// segments' names).
var winSegments atomic.Uint64

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
	const op = "WinAllocateShared"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if err := c.intra(op); err != nil {
		return nil, err
	}
	sizes := make([]int64, c.Size())
	if err := Allgather(c, []int64{int64(n)}, sizes); err != nil {
		return nil, reop(op, err)
	}
	for r, s := range sizes {
		if s < 0 {
			return nil, errorf(ErrArg, op, "rank %d asked for %d elements", r, s)
		}
	}
	if c.cc.Nodes != 1 {
		return nil, errorf(ErrComm, op, "the ranks of %s run on %d hosts: shared memory needs one (SplitType(TypeShared) first)", c.name, c.cc.Nodes)
	}
	es := elemSize[T]()
	offs := make([]int, len(sizes)+1)
	for r, s := range sizes {
		offs[r+1] = offs[r] + (int(s)*es+63)&^63
	}
	mem, err := mapShared(c, op, max(offs[len(sizes)], 64))
	if err != nil {
		return nil, err
	}
	parts := make([][]T, len(sizes))
	for r, s := range sizes {
		if s > 0 {
			parts[r] = unsafe.Slice((*T)(unsafe.Pointer(&mem[offs[r]])), int(s))
		}
	}
	w, err := WinCreate(c, parts[c.rank])
	if err != nil {
		unix.Munmap(mem)
		return nil, reop(op, err)
	}
	w.shared, w.shm = parts, mem
	return w, nil
}

// mapShared creates (rank 0) and maps (every rank) a zeroed segment of
// size bytes shared by c's ranks; every rank fails alike if any could not.
func mapShared(c *Comm, op string, size int) ([]byte, error) {
	// ok byte, then the segment's path
	msg := make([]byte, 1+128)
	var mem []byte
	var path string
	if c.rank == 0 {
		path = filepath.Join("/dev/shm", fmt.Sprintf("gorun-%s-win-%d-%d", coll.Job(), os.Getpid(), winSegments.Add(1)))
		if b, err := shmseg.Create(path, size); err == nil {
			mem = b
			msg[0] = 1
			copy(msg[1:], path)
		}
	}
	if err := Bcast(c, msg, 0); err != nil {
		if mem != nil {
			unix.Munmap(mem)
			unix.Unlink(path)
		}
		return nil, reop(op, err)
	}
	var why error
	if c.rank != 0 && msg[0] == 1 {
		p := string(msg[1 : 1+clen(msg[1:])])
		if b, err := shmseg.Open(p, size); err == nil {
			mem = b
		} else {
			why = err
		}
	}
	ok := []int32{0}
	if mem != nil {
		ok[0] = 1
	}
	all := []int32{0}
	err := Allreduce(c, ok, all, Min)
	if c.rank == 0 && mem != nil {
		unix.Unlink(path)
	}
	if err == nil && all[0] == 1 {
		return mem, nil
	}
	if mem != nil {
		unix.Munmap(mem)
	}
	if err != nil {
		return nil, reop(op, err)
	}
	if why == nil {
		why = fmt.Errorf("a rank could not create or map the segment (%d bytes under /dev/shm)", size)
	}
	return nil, errorf(ErrNoMem, op, "shared memory for the window: %w", why)
}

// clen is the length of the NUL-terminated string at the start of b.
func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
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
	if w.shared == nil {
		return nil, errorf(ErrWin, op, "%s is not a shared-memory window (WinAllocateShared makes them)", w.name)
	}
	if rank < 0 || rank >= len(w.shared) {
		return nil, errorf(ErrRank, op, "rank %d is not in %s (size %d)", rank, w.name, len(w.shared))
	}
	return w.shared[rank], nil
}
