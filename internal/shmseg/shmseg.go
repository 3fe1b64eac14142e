// Package shmseg creates and maps the shared-memory segments that the
// ranks of one host share (coll's shared-memory collectives, mpi's shared
// windows): files under /dev/shm named gorun-<job>-..., which gorun's
// reaper removes whatever happens to the job; and backs the memory of
// btl/sm's rings (Back).
package shmseg

import (
	"errors"
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// Dir is where the segments are made.
const Dir = "/dev/shm"

// Free returns the bytes free for this user in Dir, math.MaxInt when it
// sets no limit (a tmpfs mounted with size=0, ramfs: statfs reports no
// blocks) or cannot be read (Create says what is wrong then). The
// segments' makers size what they take by it: a container's /dev/shm is
// 64 MiB by default.
func Free() int {
	var st unix.Statfs_t
	if err := unix.Statfs(Dir, &st); err != nil || st.Blocks == 0 {
		return math.MaxInt
	}
	return int(min(st.Bavail*uint64(st.Bsize), math.MaxInt))
}

// ErrFull is the error of a segment, or a part of one, that /dev/shm
// could not hold.
var ErrFull = errors.New("no room in " + Dir)

// Create creates the file path (it must not exist), backs size bytes of
// it now, so that a full /dev/shm is an error here and not a SIGBUS at
// first touch, and maps it shared. The memory starts zeroed. One rank
// backs the whole segment: tmpfs's fallocate allocates without zeroing
// (a page is zeroed at its first touch, by whichever rank touches it),
// where each rank backing its own part with MADV_POPULATE_WRITE zeroed
// every page at once and made a communicator's set-up slower (a Dup's
// first barrier at np=16 on the lent 16-core host: 5.3 -> 8.3 ms,
// medians of 7; docs/measurements.md, "The first call's set-up").
func Create(path string, size int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		unix.Unlink(path)
		return nil, fmt.Errorf("allocate %s: %w", path, err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Unlink(path)
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return b, nil
}

// Open maps the file path, which Create made with the same size.
func Open(path string, size int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != int64(size) {
		return nil, fmt.Errorf("open %s: size %d, want %d (%v)", path, st.Size, size, err)
	}
	return unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// Back allocates the memory of mem, a page-aligned shared mapping of fd
// from file offset off, and maps it into this process: MADV_POPULATE_WRITE
// (Linux 5.14), which allocates, zeroes and maps each page in one pass
// and, unlike a first touch, fails with an error instead of a SIGBUS when
// /dev/shm is full (ErrFull, the pages it took given back); on older
// kernels fallocate, whose pages the first touches then map. It takes no
// lock on the file, where tmpfs's fallocate holds it while it allocates:
// the senders that reach one rank at once do not take turns. A 1 MiB
// ring on the lent 16-core host: 0.41-0.45 ms, against 0.55-0.72 for
// fallocate and a MAP_POPULATE mapping (bench/shmcost, three runs).
func Back(fd int, mem []byte, off int64) error {
	err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL):
		err = unix.Fallocate(fd, 0, off, int64(len(mem)))
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("%w for %d bytes (fallocate: %v)", ErrFull, len(mem), err)
		}
		return err
	case errors.Is(err, unix.EFAULT), errors.Is(err, unix.ENOMEM):
		// A page the file system could not give (EFAULT: where a touch
		// would have raised SIGBUS): give back the ones it did.
		Unback(fd, off, len(mem))
		return fmt.Errorf("%w for %d bytes (MADV_POPULATE_WRITE: %s)", ErrFull, len(mem), unix.ErrnoName(err.(unix.Errno)))
	}
	return err
}

// Unback gives the memory of the n bytes of fd from off back to /dev/shm
// (a hole punched, the file's size kept): what Back took for a mapping
// that will not be used.
func Unback(fd int, off int64, n int) {
	unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, int64(n))
}
