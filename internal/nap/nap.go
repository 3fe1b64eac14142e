// Package nap sleeps for short times (microseconds) precisely.
//
// time.Sleep of less than a millisecond costs about a millisecond when
// the process has nothing else to run: the Go scheduler then waits for
// the timer in epoll_wait, whose timeout is in whole milliseconds (a
// 20 µs time.Sleep took 1.13 ms, a 20 µs nanosleep 0.12 ms, on the
// 2-core CI machine with GOMAXPROCS=1). The waits that give the CPU away
// between polls (p2p, the shared-memory collectives, the window service,
// btl/ofi) would turn every wait past their spinning phase into a
// millisecond: on the 32-core host, with waits forced into that phase
// (GORUN_WAIT_YIELD=0), a barrier at np=32 took 1.05 ms.
//
// Sleep calls nanosleep directly: the calling thread sleeps in the
// kernel (high-resolution timers), and the runtime hands its P to other
// goroutines meanwhile as for any blocking system call.
package nap

import (
	"time"

	"golang.org/x/sys/unix"
)

// Sleep sleeps for d; from a millisecond on it is time.Sleep.
func Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Nanosleep(&ts, nil)
}
