// Package shmseg creates and maps the shared-memory segments that the
// ranks of one host share (coll's shared-memory collectives, mpi's shared
// windows): files under /dev/shm named gorun-<job>-..., which gorun's
// reaper removes whatever happens to the job.
package shmseg

import (
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

// Create creates the file path (it must not exist), backs size bytes of
// it now, so that a full /dev/shm is an error here and not a SIGBUS at
// first touch, and maps it shared. The memory starts zeroed.
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
