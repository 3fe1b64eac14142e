package agent

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once the process p has exited (it may then be
// reaped without blocking), waiting on a pidfd through the Go runtime's
// poller instead of in wait4: a goroutine blocked in Process.Wait holds an
// OS thread, one per rank (a launcher of 16 local ranks had 17 of its 24
// threads in the kernel's do_wait). Where pidfds are missing (Linux before
// 5.3) it returns at once and the caller's Wait blocks as before. The
// descriptor is made non-blocking after it is opened: PIDFD_NONBLOCK
// itself needs Linux 5.10.
func awaitExit(p *os.Process) {
	fd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil {
		return
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return
	}
	// A non-blocking descriptor goes to the poller (edge-triggered, from
	// here on: an exit after the first check below still wakes the wait).
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return n > 0 || (err != nil && err != unix.EINTR)
	})
}
