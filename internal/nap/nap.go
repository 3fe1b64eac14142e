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
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Yield gives this thread's CPU to another thread that is ready to run
// on it, if there is one (sched_yield), and returns at once otherwise.
//
// It is a raw system call: the calling goroutine keeps its P. Through
// the runtime's system-call path (unix.Syscall), a yield that let another
// thread run for more than 20 µs left the P in a system call long enough
// for the runtime's monitor thread (sysmon) to take it away, hand it to
// another thread, and poll every 20 µs for the next millisecond. On ranks
// bound to one CPU each (np = cores) those polls preempted every rank
// about 2000 times a second, the goroutine moved between four threads,
// and one collective call in four at np=32 was delayed by some rank's
// preemption (allreduce of 8 B: median 3.8 µs, 90th percentile 12 µs).
func Yield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// Pass is one turn of a wait loop's yielding phase, turn i of the wait:
// Yield, and on every 1024th turn also runtime.Gosched. The yield keeps
// the P, so the process's other goroutines (the failure detector's, a
// window's service) get it only through the Gosched; not on every turn:
// Gosched wakes the other P's thread, which on a rank bound to one CPU
// then competes with this one (100k context switches a second per rank
// when it came every 16 turns).
func Pass(i int) {
	Yield()
	if i&1023 == 0 {
		runtime.Gosched()
	}
}

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
